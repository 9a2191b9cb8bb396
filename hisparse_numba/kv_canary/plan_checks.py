"""The checks of the kv-canary plan launchers (``plan.py``), in sglang's order and with its texts.

Host checks (types, scalars, shapes, dtypes, layouts) come first, sglang's in its order. Then, with
``checks="full"`` (the default), one device pass checks every value the plan kernels index with,
per batch row with ``rp = req_pool_indices[r] != 0`` (0 marks a padding row, never read):

0. ``0 <= rp < max_reqs`` (``req_to_token``'s rows);
1. ``-2^62 <= prefix_lens[r] <= max_seq_len`` (verify entries read positions ``< prefix_len``;
   the lower bound keeps ``prefix_len - swa_window_size`` inside int64);
2. ``extend_seq_lens[r] <= max_seq_len - max(prefix_lens[r], 0)`` (the sequence fits its row; it
   also bounds the write offsets' sums);
3. with an expected-token pool, ``rp < pool.shape[0]``.

Negative prefix or extend lengths, negative valid lengths and any offset are harmless by definition
(they give empty ranges); the SWA table is clamped. Duplicate request rows only repeat entries.
``plan_value_verdict_reference`` is the NumPy twin of the check kernel (``docs/kv-canary-behaviour.md#plan``).
Lessons 02 (verify capacity) and 12 (capacity and SWA) teach two of these checks.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .. import device, value_flags
from ..checks import (CANARY_PREFIX, check_array, check_int, check_mode, check_no_overlap,
                      check_values, describe, element_at, fail, raise_first,
                      remember_host_checks, require_array, settle)
from ..device import cuda
from ..value_flags import finish_check_dev, flag_bad_dev
from .plan_types import VerifyPlan, WritePlan

PLAN_BS_BLOCK_SIZE = 4096
MAX_POSITION_OFFSET = 1 << 31  # |kv_token_id_vs_position_offset| (sglang uses 0 or 1)
# prefix_lens - swa_window_size must not overflow int64: the window is at most 2^62 and a prefix
# at least -2^62 (a negative prefix is an empty range; one further below 0 would wrap the window's
# start to a huge positive position)
MAX_SWA_WINDOW = 1 << 62
MIN_PREFIX_LEN = -(1 << 62)


class CanaryPlanCall(NamedTuple):
    """One accepted plan call: the configuration and every array (see ``plan.launch_unchecked``).

    The optional arrays stay None when the caller passed None; the launcher substitutes the
    placeholders the kernels' fixed argument lists need.
    """

    bs: int
    swa_window_size: int
    verify_capacity: int
    kv_token_id_vs_position_offset: int
    verify_plan_out: object
    write_plan_out: object
    req_pool_indices: object
    prefix_lens: object
    extend_seq_lens: object
    req_to_token: object
    full_to_swa_index_mapping: object = None
    req_to_verify_expected_tokens: object = None
    req_to_verify_expected_tokens_valid_lens: object = None
    gate: object = None        # the value check's flags (value_flags.start_check); None: always open
    pending: object = None     # that check's value_flags.ValueCheck until the launcher settles it


@remember_host_checks()
def canary_plan_host_checks(*, verify_plan_out, write_plan_out, req_pool_indices, prefix_lens,
                            extend_seq_lens, req_to_token, swa_window_size,
                            full_to_swa_index_mapping, verify_capacity,
                            req_to_verify_expected_tokens, req_to_verify_expected_tokens_valid_lens,
                            kv_token_id_vs_position_offset,
                            fn="launch_canary_plan_kernels") -> CanaryPlanCall:
    """The host part of :func:`check_canary_plan` (types, shapes, dtypes, layouts, scalars; no value
    inside an array), remembered for repeated calls on the same buffers."""
    if not isinstance(verify_plan_out, VerifyPlan):
        raise TypeError(f"kv-canary: {fn} verify_plan_out must be a VerifyPlan, got {type(verify_plan_out).__name__}")
    if not isinstance(write_plan_out, WritePlan):
        raise TypeError(f"kv-canary: {fn} write_plan_out must be a WritePlan, got {type(write_plan_out).__name__}")
    window = check_int("swa_window_size", swa_window_size, prefix=CANARY_PREFIX)
    capacity = check_int("verify_capacity", verify_capacity, prefix=CANARY_PREFIX)
    offset = check_int("kv_token_id_vs_position_offset", kv_token_id_vs_position_offset,
                     -MAX_POSITION_OFFSET, MAX_POSITION_OFFSET, prefix=CANARY_PREFIX)
    for name, a in (("req_pool_indices", req_pool_indices), ("prefix_lens", prefix_lens),
                    ("extend_seq_lens", extend_seq_lens), ("req_to_token", req_to_token),
                    *(("verify_plan_out." + k, v) for k, v in verify_plan_out.arrays().items()),
                    *(("write_plan_out." + k, v) for k, v in write_plan_out.arrays().items())):
        require_array(name, a, prefix=CANARY_PREFIX)
    for name, a in (("full_to_swa_index_mapping", full_to_swa_index_mapping),
                    ("req_to_verify_expected_tokens", req_to_verify_expected_tokens),
                    ("req_to_verify_expected_tokens_valid_lens", req_to_verify_expected_tokens_valid_lens)):
        if a is not None:
            require_array(name, a, prefix=CANARY_PREFIX)
    if window > 0 and full_to_swa_index_mapping is None:
        fail(f"kv-canary: {fn} requires full_to_swa_index_mapping when swa_window_size > 0")
    _check_vector(fn, "verify_plan_out.verify_slot_indices", verify_plan_out.verify_slot_indices, np.int64)
    plan_verify_capacity = int(verify_plan_out.verify_slot_indices.shape[0])
    if capacity != plan_verify_capacity:
        fail(f"kv-canary: {fn} verify_capacity={verify_capacity} does not match "
             f"verify_plan_out.verify_slot_indices.shape[0]={plan_verify_capacity}")
    if req_to_verify_expected_tokens is not None and req_to_verify_expected_tokens_valid_lens is None:
        fail(f"kv-canary: {fn} requires req_to_verify_expected_tokens_valid_lens when "
             f"req_to_verify_expected_tokens is set")
    _check_vector(fn, "req_pool_indices", req_pool_indices, np.int64)
    bs = int(req_pool_indices.shape[0])
    if bs > PLAN_BS_BLOCK_SIZE:
        fail(f"kv-canary: {fn} supports at most bs={PLAN_BS_BLOCK_SIZE} reqs per launch, got bs={bs}. "
             f"Bump PLAN_BS_BLOCK_SIZE if real workloads need this.")
    _check_vector(fn, "write_plan_out.write_seed_slot_indices", write_plan_out.write_seed_slot_indices, np.int64)
    write_req_capacity = int(write_plan_out.write_seed_slot_indices.shape[0])
    if bs > write_req_capacity:
        fail(f"kv-canary: bs={bs} exceeds write_req_capacity={write_req_capacity}")
    if window < 0 or window > MAX_SWA_WINDOW:
        fail(f"kv-canary: {fn} swa_window_size must be in [0, 2^62], got {swa_window_size}")
    _check_vector(fn, "prefix_lens", prefix_lens, np.int64, bs, "req_pool_indices")
    _check_vector(fn, "extend_seq_lens", extend_seq_lens, np.int64, bs, "req_pool_indices")
    _check_matrix(fn, "req_to_token", req_to_token, np.int32)
    if req_to_token.shape[1] <= 0:
        fail(f"kv-canary: {fn} req_to_token must have at least one column, got {describe(req_to_token)}")
    if full_to_swa_index_mapping is not None:
        _check_vector(fn, "full_to_swa_index_mapping", full_to_swa_index_mapping, np.int64)
        if full_to_swa_index_mapping.shape[0] == 0:
            fail(f"kv-canary: {fn} full_to_swa_index_mapping must not be empty")
    if req_to_verify_expected_tokens is not None:
        _check_matrix(fn, "req_to_verify_expected_tokens", req_to_verify_expected_tokens, np.int32)
    if req_to_verify_expected_tokens_valid_lens is not None:
        _check_vector(fn, "req_to_verify_expected_tokens_valid_lens",
                      req_to_verify_expected_tokens_valid_lens, np.int64, bs, "req_pool_indices")
    cap = plan_verify_capacity
    for name in ("verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
                 "verify_prev_slot_indices"):
        _check_vector(fn, f"verify_plan_out.{name}", getattr(verify_plan_out, name), np.int64, cap,
                      "verify_plan_out.verify_slot_indices")
    _check_vector(fn, "verify_plan_out.verify_num_valid", verify_plan_out.verify_num_valid, np.int32, 1)
    _check_vector(fn, "verify_plan_out.enable", verify_plan_out.enable, np.int32, 1)
    _check_vector(fn, "write_plan_out.write_offsets", write_plan_out.write_offsets, np.int64,
                  write_req_capacity + 1, "write_plan_out.write_seed_slot_indices, plus one")
    _check_vector(fn, "write_plan_out.write_seed_slot_indices", write_plan_out.write_seed_slot_indices,
                  np.int64, write_req_capacity)
    _check_vector(fn, "write_plan_out.write_num_valid_reqs", write_plan_out.write_num_valid_reqs,
                  np.int32, 1)
    written = {"verify_plan_out." + k: v for k, v in verify_plan_out.arrays().items()}
    written.update(("write_plan_out." + k, v) for k, v in write_plan_out.arrays().items())
    check_no_overlap(written, {
        "req_pool_indices": req_pool_indices, "prefix_lens": prefix_lens,
        "extend_seq_lens": extend_seq_lens, "req_to_token": req_to_token,
        "full_to_swa_index_mapping": full_to_swa_index_mapping,
        "req_to_verify_expected_tokens": req_to_verify_expected_tokens,
        "req_to_verify_expected_tokens_valid_lens": req_to_verify_expected_tokens_valid_lens},
        f"{CANARY_PREFIX}{fn} ")
    call = CanaryPlanCall(
        bs=bs, swa_window_size=window, verify_capacity=capacity,
        kv_token_id_vs_position_offset=offset,
        verify_plan_out=verify_plan_out, write_plan_out=write_plan_out,
        req_pool_indices=req_pool_indices, prefix_lens=prefix_lens, extend_seq_lens=extend_seq_lens,
        req_to_token=req_to_token, full_to_swa_index_mapping=full_to_swa_index_mapping,
        req_to_verify_expected_tokens=req_to_verify_expected_tokens,
        req_to_verify_expected_tokens_valid_lens=req_to_verify_expected_tokens_valid_lens)
    return call


def check_canary_plan(*, verify_plan_out, write_plan_out, req_pool_indices, prefix_lens,
                      extend_seq_lens, req_to_token, swa_window_size, full_to_swa_index_mapping,
                      verify_capacity, req_to_verify_expected_tokens,
                      req_to_verify_expected_tokens_valid_lens, kv_token_id_vs_position_offset,
                      fn: str = "launch_canary_plan_kernels", checks: str = "full", defer: bool = False,
                      on_device: bool = True) -> CanaryPlanCall:
    """Every check of the plan launchers, in sglang's order; the accepted call.

    ``fn`` names the caller in the messages (as sglang's do). ``checks="shapes"`` skips the value
    checks; ``on_device=False`` runs them in NumPy (the reference's host arrays).
    """
    values = check_mode(checks, prefix=CANARY_PREFIX)
    call = canary_plan_host_checks(
        verify_plan_out=verify_plan_out, write_plan_out=write_plan_out,
        req_pool_indices=req_pool_indices, prefix_lens=prefix_lens,
        extend_seq_lens=extend_seq_lens, req_to_token=req_to_token,
        swa_window_size=swa_window_size, full_to_swa_index_mapping=full_to_swa_index_mapping,
        verify_capacity=verify_capacity,
        req_to_verify_expected_tokens=req_to_verify_expected_tokens,
        req_to_verify_expected_tokens_valid_lens=req_to_verify_expected_tokens_valid_lens,
        kv_token_id_vs_position_offset=kv_token_id_vs_position_offset, fn=fn)
    if values:
        call = check_plan_values(call, fn=fn, on_device=on_device, defer=defer)
    return call


# ---------------------------------------------------------------------------------------------
# The value checks: NumPy reference, then the kernel, then the runner.

REQ_OUT_OF_RANGE, PREFIX_PAST_ROW, EXTEND_PAST_ROW, POOL_TOO_SHORT = range(4)


def plan_value_verdict_reference(req_pool_indices, prefix_lens, extend_seq_lens, max_reqs: int,
                                 max_seq_len: int, pool_rows: int) -> list:
    """``[(count, first bad row), ...]`` per condition (module docstring); ``pool_rows = -1``
    without a pool. The same verdict as ``plan_value_check_kernel``."""
    rp = np.asarray(req_pool_indices, dtype=np.int64)
    prefix = np.asarray(prefix_lens, dtype=np.int64)
    extend = np.asarray(extend_seq_lens, dtype=np.int64)
    active = rp != 0
    bad = [active & ((rp < 0) | (rp >= max_reqs)),
           active & ((prefix > max_seq_len) | (prefix < MIN_PREFIX_LEN)),
           active & (extend > max_seq_len - np.maximum(prefix, 0)),
           active & (pool_rows >= 0) & (rp >= pool_rows)]
    verdict = [(int(b.sum()), int(np.argmax(b)) if b.any() else -1) for b in bad]
    return verdict + [(0, -1)] * (value_flags.CHECK_CONDITIONS - len(verdict))


@cuda.jit(device=True, inline=True)
def plan_value_check_dev(req_pool_indices, prefix_lens, extend_seq_lens, max_reqs, max_seq_len,
                         pool_rows, flags):
    r = cuda.grid(1)
    while r < req_pool_indices.shape[0]:
        rp = req_pool_indices[r]
        if rp != 0:
            prefix = prefix_lens[r]
            if rp < 0 or rp >= max_reqs:
                flag_bad_dev(flags, REQ_OUT_OF_RANGE, r)
            if prefix > max_seq_len or prefix < MIN_PREFIX_LEN:
                flag_bad_dev(flags, PREFIX_PAST_ROW, r)
            if extend_seq_lens[r] > max_seq_len - max(prefix, 0):
                flag_bad_dev(flags, EXTEND_PAST_ROW, r)
            if pool_rows >= 0 and rp >= pool_rows:
                flag_bad_dev(flags, POOL_TOO_SHORT, r)
        r += cuda.gridsize(1)


@cuda.jit
def plan_value_check_kernel(req_pool_indices, prefix_lens, extend_seq_lens, max_reqs, max_seq_len,
                            pool_rows, flags, verdict):
    plan_value_check_dev(req_pool_indices, prefix_lens, extend_seq_lens, max_reqs, max_seq_len,
                         pool_rows, flags)
    finish_check_dev(flags, verdict)


def _value_geometry(bs: int) -> tuple[int, int]:
    threads = 32 if device.SIMULATOR else 256
    return max(1, min(-(-bs // threads), 2 if device.SIMULATOR else 16)), threads


def value_arguments(call: CanaryPlanCall) -> tuple:
    """The check's arguments: the three row arrays, then ``max_reqs``, ``max_seq_len`` and the
    pool's rows (-1 without a pool)."""
    pool = call.req_to_verify_expected_tokens
    return (call.req_pool_indices, call.prefix_lens, call.extend_seq_lens, int(call.req_to_token.shape[0]),
            int(call.req_to_token.shape[1]), -1 if pool is None else int(pool.shape[0]))


def check_plan_values(call: CanaryPlanCall, *, fn: str = "launch_canary_plan_kernels",
                      on_device: bool = True, defer: bool = False) -> CanaryPlanCall:
    """The value checks of ``call`` (module docstring), on their own: one kernel, whose last block
    writes the verdict (the public launcher runs the same check inside its offsets kernel), or
    NumPy with ``on_device=False``. Raises the first failing condition's ``ValueError``.

    ``defer=True`` returns the call with its ``gate`` and ``pending`` check
    as soon as the check is enqueued; :func:`settle_canary_plan` raises after the gated launch."""
    if call.bs == 0:
        return call
    args = value_arguments(call)
    return check_values(
        call, functools.partial(raise_plan_flags, fn=fn), on_device=on_device, defer=defer,
        reference=lambda: plan_value_verdict_reference(*args),
        start=lambda: value_flags.start_check(plan_value_check_kernel, *_value_geometry(call.bs), *args))


def settle_canary_plan(call: CanaryPlanCall) -> CanaryPlanCall:
    """Wait for ``call``'s value check: raise its ``ValueError`` or return the settled call."""
    return settle(call, raise_plan_flags)


def raise_plan_flags(verdict, call: CanaryPlanCall, fn: str = "launch_canary_plan_kernels") -> None:
    """The ``ValueError`` of the first failed condition of a plan call's verdict (none: returns)."""
    _, _, _, max_reqs, max_seq_len, pool_rows = value_arguments(call)
    rp, prefix, extend = call.req_pool_indices, call.prefix_lens, call.extend_seq_lens

    raise_first(verdict, [   # one message per condition, given the first bad row r
        lambda r: (f"kv-canary: {fn} req_pool_indices[{r}]={element_at(rp, r)} is not a row of req_to_token "
                   f"(0 < rp < {max_reqs}; 0 marks a padding row)"),
        lambda r: _prefix_message(fn, r, element_at(prefix, r), element_at(rp, r), max_seq_len),
        lambda r: (f"kv-canary: {fn} extend_seq_lens[{r}]={element_at(extend, r)} with prefix_lens[{r}]="
                   f"{element_at(prefix, r)} runs past req_to_token's max_seq_len={max_seq_len}"),
        lambda r: (f"kv-canary: {fn} req_to_verify_expected_tokens has {pool_rows} rows, but "
                   f"req_pool_indices[{r}]={element_at(rp, r)} needs row {element_at(rp, r)}"),
    ])


def _prefix_message(fn, r, value, rp, max_seq_len) -> str:
    if value > max_seq_len:
        return (f"kv-canary: {fn} prefix_lens[{r}]={value} exceeds req_to_token's max_seq_len={max_seq_len} "
                f"(request row {rp})")
    return (f"kv-canary: {fn} prefix_lens[{r}]={value} is below -2^62 (request row {rp}): "
            "prefix_lens - swa_window_size would overflow int64")


def _check_vector(fn, name, a, dtype, length=None, length_of=None):
    """``a`` is 1-D (of ``length`` entries: the length of ``length_of``), ``dtype``, contiguous."""
    if a.ndim != 1 or (length is not None and a.shape[0] != length):
        want = f"[{length}]" if length is not None else "1-D"
        if length_of is not None:
            want += f" (the length of {length_of})"
        fail(f"kv-canary: {fn} {name} must have shape {want}, got {describe(a)}")
    check_array(name, a, dtype, prefix=CANARY_PREFIX)


def _check_matrix(fn, name, a, dtype):
    if a.ndim != 2:
        fail(f"kv-canary: {fn} {name} must be 2-D, got {describe(a)}")
    check_array(name, a, dtype, prefix=CANARY_PREFIX)
