"""The checks of the kv-canary plan launchers (``plan.py``), in sglang's order and with its texts.

Only shapes, dtypes and layouts are checked: the plan kernels never read device data back to the
host, so the data preconditions (``0 <= rp < max_reqs``, ``prefix_len <= max_seq_len``) stay the
caller's (``docs/kv-canary.md#plan``). Lessons 02 (verify capacity) and 12 (capacity and SWA)
teach two of these checks.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..checks import check_canary_array, describe, fail

PLAN_BS_BLOCK_SIZE = 4096


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


def check_canary_plan(*, verify_plan_out, write_plan_out, req_pool_indices, prefix_lens,
                      extend_seq_lens, req_to_token, swa_window_size, full_to_swa_index_mapping,
                      verify_capacity, req_to_verify_expected_tokens,
                      req_to_verify_expected_tokens_valid_lens, kv_token_id_vs_position_offset,
                      fn: str = "launch_canary_plan_kernels") -> CanaryPlanCall:
    """Every check of the plan launchers, in sglang's order; the accepted call.

    ``fn`` names the caller in the messages (as sglang's do).
    """
    if int(swa_window_size) > 0 and full_to_swa_index_mapping is None:
        fail(f"kv-canary: {fn} requires full_to_swa_index_mapping when swa_window_size > 0")
    plan_verify_capacity = int(verify_plan_out.verify_slot_indices.shape[0])
    if int(verify_capacity) != plan_verify_capacity:
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
    write_req_capacity = int(write_plan_out.write_seed_slot_indices.shape[0])
    if bs > write_req_capacity:
        fail(f"kv-canary: bs={bs} exceeds write_req_capacity={write_req_capacity}")
    if int(swa_window_size) < 0:
        fail(f"kv-canary: {fn} swa_window_size must be >= 0, got {swa_window_size}")
    _check_vector(fn, "prefix_lens", prefix_lens, np.int64, bs)
    _check_vector(fn, "extend_seq_lens", extend_seq_lens, np.int64, bs)
    _check_matrix(fn, "req_to_token", req_to_token, np.int32)
    if req_to_token.shape[1] <= 0:
        fail(f"kv-canary: {fn} req_to_token must have at least one column, got {describe(req_to_token)}")
    if full_to_swa_index_mapping is not None:
        _check_vector(fn, "full_to_swa_index_mapping", full_to_swa_index_mapping, np.int64)
        if full_to_swa_index_mapping.shape[0] == 0:
            fail(f"kv-canary: {fn} full_to_swa_index_mapping must not be empty")
    if req_to_verify_expected_tokens is not None:
        _check_matrix(fn, "req_to_verify_expected_tokens", req_to_verify_expected_tokens, np.int32)
        _check_vector(fn, "req_to_verify_expected_tokens_valid_lens",
                      req_to_verify_expected_tokens_valid_lens, np.int64, bs)
    elif req_to_verify_expected_tokens_valid_lens is not None:
        _check_vector(fn, "req_to_verify_expected_tokens_valid_lens",
                      req_to_verify_expected_tokens_valid_lens, np.int64, bs)
    cap = plan_verify_capacity
    for name in ("verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
                 "verify_prev_slot_indices"):
        _check_vector(fn, f"verify_plan_out.{name}", getattr(verify_plan_out, name), np.int64, cap)
    _check_vector(fn, "verify_plan_out.verify_num_valid", verify_plan_out.verify_num_valid, np.int32, 1)
    _check_vector(fn, "verify_plan_out.enable", verify_plan_out.enable, np.int32, 1)
    _check_vector(fn, "write_plan_out.write_offsets", write_plan_out.write_offsets, np.int64,
                  write_req_capacity + 1)
    _check_vector(fn, "write_plan_out.write_seed_slot_indices", write_plan_out.write_seed_slot_indices,
                  np.int64, write_req_capacity)
    _check_vector(fn, "write_plan_out.write_num_valid_reqs", write_plan_out.write_num_valid_reqs,
                  np.int32, 1)
    return CanaryPlanCall(
        bs=bs, swa_window_size=int(swa_window_size), verify_capacity=int(verify_capacity),
        kv_token_id_vs_position_offset=int(kv_token_id_vs_position_offset),
        verify_plan_out=verify_plan_out, write_plan_out=write_plan_out,
        req_pool_indices=req_pool_indices, prefix_lens=prefix_lens, extend_seq_lens=extend_seq_lens,
        req_to_token=req_to_token, full_to_swa_index_mapping=full_to_swa_index_mapping,
        req_to_verify_expected_tokens=req_to_verify_expected_tokens,
        req_to_verify_expected_tokens_valid_lens=req_to_verify_expected_tokens_valid_lens)


def _check_vector(fn, name, a, dtype, length=None):
    if a.ndim != 1 or (length is not None and a.shape[0] != length):
        want = f"[{length}]" if length is not None else "1-D"
        fail(f"kv-canary: {fn} {name} must have shape {want}, got {describe(a)}")
    check_canary_array(name, a, dtype)


def _check_matrix(fn, name, a, dtype):
    if a.ndim != 2:
        fail(f"kv-canary: {fn} {name} must be 2-D, got {describe(a)}")
    check_canary_array(name, a, dtype)
