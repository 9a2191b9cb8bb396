"""The checks of the kv-canary write launcher (``write.py``), run before anything is written.

Host checks: the context (``context.check_context``), the flag and the expected tensors (sglang's
texts), the WritePlan's and inputs' types, dtypes and shapes, and that no array the kernel reads
shares memory with one it writes. Then, with ``checks="full"`` (the default), ONE device pass over
the rows ``r < active = min(max(write_num_valid_reqs, 0), R)`` checks every value the write kernel
indexes with (``docs/kv-canary-behaviour.md#write``):

0. ``0 <= write_offsets[r] <= write_offsets[r + 1] <= num_tokens`` (so rows are disjoint ranges
   of the inputs);
1. every live slot (``out_cache_loc[i] >= 0`` in a row's range) is ``< num_slots``;
2. the seed of a row that writes something is ``< num_slots`` (negative: a chain head);
3. live slots are pairwise distinct (two writers of one slot would race);
4. no live slot is a writing row's seed (its reader would race with the writer).

Negative slots, negative seeds and a ``write_num_valid_reqs`` outside ``[0, R]`` are harmless by
definition (skipped, chain head, clamped). Entries outside every row's range are never read.

The duplicate checks stamp each slot with a per-call number (an epoch) in a per-stream marks
buffer ``[2, num_slots]`` int32 (row 0: written slots, row 1: seeds; ``value_flags.claim_table``) with
atomic exchanges: a stamp that finds the same epoch is a repeat, so the buffer is never cleared between calls. Its
size follows the canary buffer, not the values. Condition 4 is seen by the writer, the reader or
both, so its count may differ between runs; whether it fired and its smallest slot do not.
``write_value_verdict_reference`` is the NumPy twin of the kernel's verdict.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import device, value_flags
from ..checks import (CANARY_PREFIX, check_array, check_flag, check_mode, check_values,
                      describe, element_at, fail, raise_first, remember_host_checks, require_array,
                      settle)
from ..device import cuda
from ..value_flags import claim_epoch_dev, finish_check_dev, flag_bad_dev
from .context import VerifyOrWriteContext, check_context, check_launch_memory, check_plan_arrays
from .plan_types import WritePlan


class CanaryWriteCall(NamedTuple):
    """One accepted write launch: every argument of the call (see ``write.launch_unchecked``)."""

    context: VerifyOrWriteContext
    plan: WritePlan
    input_ids: object
    positions: object
    out_cache_loc: object
    enable_write_input_assert: bool
    expected_input_tokens: object = None
    expected_input_positions: object = None
    gate: object = None        # the value check's flags (value_flags.start_check); None: always open
    pending: object = None     # that check's value_flags.ValueCheck until the launcher settles it


@remember_host_checks()
def canary_write_host_checks(*, context, plan, input_ids, positions, out_cache_loc,
                             enable_write_input_assert, expected_input_tokens,
                             expected_input_positions) -> CanaryWriteCall:
    """The host part of :func:`check_canary_write` (types, shapes, dtypes, layouts, scalars; no value
    inside an array), remembered for repeated calls on the same buffers."""
    check_context(context)
    enable = check_flag("enable_write_input_assert", enable_write_input_assert, prefix=CANARY_PREFIX)
    if enable:
        if expected_input_tokens is None or expected_input_positions is None:
            fail("kv-canary: expected input tensors are required when enable_write_input_assert=True")
    elif expected_input_tokens is not None or expected_input_positions is not None:
        fail("kv-canary: expected input tensors must be None when enable_write_input_assert=False")
    r = check_plan_arrays(plan, WritePlan, "write_seed_slot_indices",
                          type_message=f"kv-canary: plan must be a WritePlan, got {type(plan).__name__}")
    if tuple(plan.write_offsets.shape) != (r + 1,):
        fail(f"kv-canary: plan.write_offsets must have shape ({r + 1},) (one more than "
             f"plan.write_seed_slot_indices), got {describe(plan.write_offsets)}")
    check_array("plan.write_offsets", plan.write_offsets, np.int64, shape=(r + 1,), prefix=CANARY_PREFIX)
    check_array("plan.write_num_valid_reqs", plan.write_num_valid_reqs, np.int32, shape=(1,), prefix=CANARY_PREFIX)
    names = ["input_ids", "positions", "out_cache_loc"]
    arrays = [input_ids, positions, out_cache_loc]
    if enable:
        names += ["expected_input_tokens", "expected_input_positions"]
        arrays += [expected_input_tokens, expected_input_positions]
    for name, a in zip(names, arrays):
        require_array(name, a, prefix=CANARY_PREFIX)
    n = int(input_ids.shape[0]) if input_ids.ndim == 1 else -1
    for name, a in zip(names, arrays):
        check_array(name, a, np.int64, ndim=1, prefix=CANARY_PREFIX)
        if a.shape[0] != n:
            fail(f"kv-canary: {name} must have the length of input_ids ({n}), got {a.shape[0]}")
    check_launch_memory(context, {**{f"plan.{k}": v for k, v in plan.arrays().items()}, **dict(zip(names, arrays))})
    call = CanaryWriteCall(context=context, plan=plan, input_ids=input_ids, positions=positions,
                           out_cache_loc=out_cache_loc, enable_write_input_assert=enable,
                           expected_input_tokens=expected_input_tokens,
                           expected_input_positions=expected_input_positions)
    return call


def check_canary_write(*, context, plan, input_ids, positions, out_cache_loc, enable_write_input_assert,
                       expected_input_tokens, expected_input_positions, checks: str = "full",
                       on_device: bool = True, defer: bool = False) -> CanaryWriteCall:
    """Every check of the write launcher and its reference (before anything is written); the
    accepted call. ``checks="shapes"`` skips the value checks; ``on_device=False`` runs them in
    NumPy (the reference's host arrays)."""
    values = check_mode(checks, prefix=CANARY_PREFIX)
    call = canary_write_host_checks(
        context=context, plan=plan, input_ids=input_ids, positions=positions,
        out_cache_loc=out_cache_loc, enable_write_input_assert=enable_write_input_assert,
        expected_input_tokens=expected_input_tokens,
        expected_input_positions=expected_input_positions)
    if values:
        call = check_write_values(call, on_device=on_device, defer=defer)
    return call


# ---------------------------------------------------------------------------------------------
# The value checks: NumPy reference, then the kernel, then the runner.

OFFSETS_OUT_OF_ORDER, SLOT_PAST_BUFFER, SEED_PAST_BUFFER, SLOT_TWICE, SLOT_IS_SEED = range(5)


def write_value_verdict_reference(write_offsets, seeds, num_valid_reqs, out_cache_loc, num_slots: int) -> list:
    """``[(count, first), ...]`` per condition of the module docstring: ``first`` is the smallest
    bad row (0, 2), entry (1) or slot (3, 4). The kernel's verdict, computed with NumPy."""
    offsets = np.asarray(write_offsets, dtype=np.int64)
    seeds = np.asarray(seeds, dtype=np.int64)
    loc = np.asarray(out_cache_loc, dtype=np.int64)
    n = loc.shape[0]
    active = min(max(int(np.asarray(num_valid_reqs)[0]), 0), seeds.shape[0])
    start, end = offsets[:active], offsets[1:active + 1]
    bad_rows = (start < 0) | (end < start) | (end > n)
    writes = ~bad_rows & (end > start)                 # rows whose entries are read
    owned = np.zeros(n + 1, dtype=np.int64)            # +1 where a row starts, -1 where it ends
    np.add.at(owned, start[writes], 1)
    np.add.at(owned, end[writes], -1)
    live = (np.cumsum(owned[:n]) > 0) & (loc >= 0)
    past = live & (loc >= num_slots)
    slots, counts = np.unique(loc[live & ~past], return_counts=True)
    repeated = slots[counts > 1]
    seed_rows = np.flatnonzero(writes)
    bad_seed_rows = seed_rows[seeds[seed_rows] >= num_slots]
    read_seeds = seeds[seed_rows][(seeds[seed_rows] >= 0) & (seeds[seed_rows] < num_slots)]
    written_seeds = np.intersect1d(slots, read_seeds)

    def by_index(mask):
        return int(mask.sum()), int(np.argmax(mask)) if mask.any() else -1

    def by_value(values, count):
        return int(count), int(values.min()) if len(values) else -1

    verdict = [by_index(bad_rows), by_index(past), by_value(bad_seed_rows, len(bad_seed_rows)),
               by_value(repeated, (counts - 1).sum()), by_value(written_seeds, len(written_seeds))]
    return verdict + [(0, -1)] * (value_flags.CHECK_CONDITIONS - len(verdict))


@cuda.jit(device=True, inline=True)
def write_value_check_dev(write_offsets, seeds, num_valid_reqs, out_cache_loc, num_slots, marks,
                          flags):
    epoch = claim_epoch_dev(flags)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    active = min(max(np.int64(num_valid_reqs[0]), 0), seeds.shape[0])
    if r >= active:
        return
    start = write_offsets[r]
    end = write_offsets[r + 1]
    if start < 0 or end < start or end > out_cache_loc.shape[0]:
        if t == 0:
            flag_bad_dev(flags, OFFSETS_OUT_OF_ORDER, r)
        return
    if end == start:
        return
    seed = seeds[r]
    if t == 0 and seed >= 0:
        if seed >= num_slots:
            flag_bad_dev(flags, SEED_PAST_BUFFER, r)
        else:  # stamp, then look for a writer's stamp (the writer does the mirror image)
            cuda.atomic.exch(marks, (1, seed), epoch)
            cuda.threadfence()
            if cuda.atomic.add(marks, (0, seed), np.int32(0)) == epoch:
                flag_bad_dev(flags, SLOT_IS_SEED, seed)
    i = start + t
    while i < end:
        slot = out_cache_loc[i]
        if slot >= num_slots:
            flag_bad_dev(flags, SLOT_PAST_BUFFER, i)
        elif slot >= 0:
            if cuda.atomic.exch(marks, (0, slot), epoch) == epoch:
                flag_bad_dev(flags, SLOT_TWICE, slot)
            cuda.threadfence()
            if cuda.atomic.add(marks, (1, slot), np.int32(0)) == epoch:
                flag_bad_dev(flags, SLOT_IS_SEED, slot)
        i += cuda.blockDim.x


@cuda.jit
def write_value_check_kernel(write_offsets, seeds, num_valid_reqs, out_cache_loc, num_slots, marks,
                             flags, verdict):
    write_value_check_dev(write_offsets, seeds, num_valid_reqs, out_cache_loc, num_slots, marks,
                          flags)
    finish_check_dev(flags, verdict)


def _rows_geometry(rows: int) -> tuple[int, int]:
    return max(rows, 1), (8 if device.SIMULATOR else 128)


def _value_args(call: CanaryWriteCall) -> tuple:
    plan = call.plan
    return (plan.write_offsets, plan.write_seed_slot_indices, plan.write_num_valid_reqs, call.out_cache_loc,
            int(call.context.canary_buf.shape[0]))


def check_write_values(call: CanaryWriteCall, *, on_device: bool = True,
                       defer: bool = False) -> CanaryWriteCall:
    """The offsets, slot and seed checks of the module docstring (duplicates through the marks
    table), as ``checks.check_values`` runs them (``defer``: :func:`settle_canary_write` raises)."""
    args = _value_args(call)

    def start():
        marks = value_flags.claim_table(args[-1], planes=2)
        rows = int(call.plan.write_seed_slot_indices.shape[0])
        return value_flags.start_check(write_value_check_kernel, *_rows_geometry(rows), *args, marks)

    return check_values(call, raise_write_flags, on_device=on_device, defer=defer,
                        reference=lambda: write_value_verdict_reference(*args), start=start)


def settle_canary_write(call: CanaryWriteCall) -> CanaryWriteCall:
    """Wait for ``call``'s value check: raise its ``ValueError`` or return the settled call."""
    return settle(call, raise_write_flags)


def raise_write_flags(verdict, call: CanaryWriteCall) -> None:
    """The ``ValueError`` of the first failed condition of a write call's verdict (none: returns)."""
    plan, loc = call.plan, call.out_cache_loc
    num_slots = int(call.context.canary_buf.shape[0])
    n = int(loc.shape[0])

    raise_first(verdict, [   # one message per condition, given its first bad row, entry or slot
        lambda r: (f"kv-canary: plan.write_offsets[{r}]={element_at(plan.write_offsets, r)} and "
                   f"plan.write_offsets[{r + 1}]={element_at(plan.write_offsets, r + 1)} must satisfy "
                   f"0 <= start <= end <= {n} (the length of input_ids) for every row < write_num_valid_reqs"),
        lambda i: f"kv-canary: out_cache_loc[{i}]={element_at(loc, i)} is past canary_buf's {num_slots} slots",
        lambda r: (f"kv-canary: plan.write_seed_slot_indices[{r}]={element_at(plan.write_seed_slot_indices, r)} "
                   f"is past canary_buf's {num_slots} slots"),
        lambda slot: (f"kv-canary: out_cache_loc writes slot {slot} more than once in one launch (live "
                      f"slots must be distinct: two writers of one slot race)"),
        lambda slot: (f"kv-canary: out_cache_loc writes slot {slot}, which a row of "
                      f"plan.write_seed_slot_indices reads as its seed in the same launch (a race)"),
    ])
