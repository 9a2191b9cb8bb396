"""The preconditions of the miss-plan replay (``planned_copy.py``), checked before anything is written.

Python types, dtypes and layouts are checked on the host (sglang's plan texts first). The values
are checked on the device in one pass (:func:`start_planned_copy_check`: one launch, one block per
plan row, one 136-byte verdict read from pinned memory); :func:`planned_copy_flags_reference` is the same verdict in
NumPy. The conditions (each flag's index is the plan row):

* ``NUM_REAL``: ``num_real_reqs[0]`` negative or past the plan's rows;
* ``COUNT``: ``miss_count[r]`` outside ``[0, plan columns]``;
* ``SOURCE``: a live ``miss_src[r, m]`` (``m < miss_count[r]``) outside the host pool;
* ``DESTINATION``: a live ``miss_dst[r, m]`` outside the device pool, or a device row written by
  two live entries (the copies would race).

``checks="shapes"`` skips the device pass. Lessons: 05 (plan dtypes), 08 (padded batches).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import device, value_flags
from ...checks import (FlagTally, attach_check, check_block_size, check_flag, check_int,
                      check_item_buffer, check_item_copy, check_miss_plan, check_mode,
                      check_no_overlap, describe, fail, remember_host_checks,
                      require_array, settle)
from ...device import cuda
from ...value_flags import (CHECK_CONDITIONS, claim_epoch_dev, finish_check_dev, flag_bad_dev,
                           report_value_dev)

NUM_REAL, COUNT, SOURCE, DESTINATION = range(4)
MAX_GRID_BLOCKS = 2 ** 31 - 1    # gridDim.x; the launch uses fewer when the plan needs fewer
NUM_REAL_VALUE = CHECK_CONDITIONS - 1   # not a failure: its index carries num_real_reqs[0] back
CHECK_BLOCK = 32 if device.SIMULATOR else 128   # the simulator runs each thread as a Python thread


class PlannedCopyCall(NamedTuple):
    """One accepted replay: the configuration and every array of the call (see ``SwapInCall``)."""

    num_real: int | None       # rows replayed: num_real_reqs[0] (None: not read, checks="shapes")
    num_blocks: int
    block_size: int
    skip_io: bool              # walk the plan, move no bytes
    item_size_bytes: int
    miss_src: object
    miss_dst: object
    miss_count: object
    num_real_reqs: object      # [1] int32 device array
    host_cache: object
    device_buffer: object
    gate: object = None        # the value check's flags (value_flags.start_check); None: always open
    pending: object = None     # that check's value_flags.ValueCheck until settle_planned_copy


def plan_rows(call: PlannedCopyCall) -> int:
    return min(int(call.miss_src.shape[0]), int(call.miss_dst.shape[0]), int(call.miss_count.shape[0]))


def plan_columns(call: PlannedCopyCall) -> int:
    return min(int(call.miss_src.shape[1]), int(call.miss_dst.shape[1]))


def planned_copy_flags_reference(call: PlannedCopyCall) -> list:
    """The verdict of :func:`planned_copy_check_kernel` on a call of NumPy arrays (the first row of
    a destination written twice may differ on the device)."""
    tally = FlagTally()
    flag, count, first = tally.flag, tally.count, tally.first

    num_real = int(np.asarray(call.num_real_reqs)[0])
    count[NUM_REAL_VALUE], first[NUM_REAL_VALUE] = 1, num_real
    rows, cols = plan_rows(call), plan_columns(call)
    if num_real < 0 or num_real > rows:
        flag(NUM_REAL, 0)
    host_items = call.host_cache.nbytes // call.item_size_bytes
    device_items = call.device_buffer.nbytes // call.item_size_bytes
    claimed = []
    for r in range(max(0, min(num_real, rows))):
        n = int(call.miss_count[r])
        if n < 0 or n > cols:
            flag(COUNT, r)
            continue
        src, dst = call.miss_src[r, :n], call.miss_dst[r, :n].astype(np.int64)
        flag(SOURCE, r, ((src < 0) | (src >= host_items)).sum())
        inside = (dst >= 0) & (dst < device_items)
        flag(DESTINATION, r, (~inside).sum())
        claimed.append((r, dst[inside]))
    if claimed:
        dst = np.concatenate([d for _, d in claimed])
        rows_of = np.concatenate([np.full(d.size, r) for r, d in claimed])
        _, where = np.unique(dst, return_index=True)
        if where.size < dst.size:
            flag(DESTINATION, int(np.delete(rows_of, where).min()), dst.size - where.size)
    return tally.verdict()


@cuda.jit(device=True, inline=True)
def planned_copy_check_dev(miss_src, miss_dst, miss_count, num_real_reqs, rows, cols, host_items,
                           device_items, claims, flags):
    epoch = claim_epoch_dev(flags)
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    num_real = num_real_reqs[0]
    if r == 0 and tid == 0:
        report_value_dev(flags, NUM_REAL_VALUE, num_real)
        if num_real < 0 or num_real > rows:
            flag_bad_dev(flags, NUM_REAL, 0)
    if r >= num_real or r >= rows:
        return
    count = miss_count[r]
    if count < 0 or count > cols:
        if tid == 0:
            flag_bad_dev(flags, COUNT, r)
        return
    m = tid
    while m < count:
        src = miss_src[r, m]
        if src < 0 or src >= host_items:
            flag_bad_dev(flags, SOURCE, r)
        dst = miss_dst[r, m]
        if dst < 0 or dst >= device_items:
            flag_bad_dev(flags, DESTINATION, r)
        elif cuda.atomic.exch(claims, dst, epoch) == epoch:
            flag_bad_dev(flags, DESTINATION, r)
        m += cuda.blockDim.x


@cuda.jit
def planned_copy_check_kernel(miss_src, miss_dst, miss_count, num_real_reqs, rows, cols, host_items,
                              device_items, claims, flags, verdict):
    planned_copy_check_dev(miss_src, miss_dst, miss_count, num_real_reqs, rows, cols, host_items,
                           device_items, claims, flags)
    finish_check_dev(flags, verdict)


def start_planned_copy_check(call: PlannedCopyCall) -> value_flags.ValueCheck:
    """Enqueue :func:`planned_copy_check_kernel` on ``call`` (``value_flags.start_check``)."""
    item = call.item_size_bytes
    device_items = call.device_buffer.nbytes // item
    claims = value_flags.claim_table(device_items)
    rows = plan_rows(call)
    return value_flags.start_check(
        planned_copy_check_kernel, max(rows, 1), CHECK_BLOCK, call.miss_src, call.miss_dst,
        call.miss_count, call.num_real_reqs, np.int64(rows), np.int64(plan_columns(call)),
        np.int64(call.host_cache.nbytes // item), np.int64(device_items), claims)


def _shape_message(n) -> str:
    return f"miss_src/miss_dst must have shape [>= num_real_reqs ({n}), max misses]."


def _count_message(n) -> str:
    return f"miss_count must have shape [>= num_real_reqs ({n})]."


def raise_planned_copy_flags(flags, call: PlannedCopyCall) -> None:
    """The ``ValueError`` of the first failed condition (reads the offending row back)."""
    num_real, item = flags[NUM_REAL_VALUE][1], call.item_size_bytes
    if flags[NUM_REAL][0]:
        if num_real < 0:
            fail(f"num_real_reqs[0] = {num_real} must be >= 0")
        if num_real > min(call.miss_src.shape[0], call.miss_dst.shape[0]):
            fail(_shape_message(num_real))
        fail(_count_message(num_real))
    failed = [c for c in (COUNT, SOURCE, DESTINATION) if flags[c][0]]
    if not failed:
        return
    if failed[0] == COUNT:
        r = flags[COUNT][1]
        fail(f"miss_count[{r}] = {int(device.to_host(call.miss_count[r:r + 1])[0])} is outside "
             f"[0, {plan_columns(call)}] (the plan's columns; rows below num_real_reqs[0] = {num_real} "
             "are replayed)")
    counts = device.to_host(call.miss_count[:num_real]).astype(np.int64)
    if failed[0] == SOURCE:
        r = flags[SOURCE][1]
        src = device.to_host(call.miss_src[r, :counts[r]])
        if (src < 0).any():
            fail("miss_src and miss_dst entries below miss_count must be >= 0 (a -1 row has no item)")
        m = int(np.argmax(src))
        fail(f"host_cache holds {call.host_cache.nbytes} bytes, but miss_src[{r}, {m}] = {int(src[m])} "
             f"needs item {int(src[m])} of item_size_bytes = {item}")
    device_items = call.device_buffer.nbytes // item
    owner = {}
    for r in range(num_real):
        for m, dst in enumerate(device.to_host(call.miss_dst[r, :counts[r]]).tolist()):
            if dst < 0:
                fail("miss_src and miss_dst entries below miss_count must be >= 0 (a -1 row has no item)")
            if dst >= device_items:
                fail(f"device_buffer holds {call.device_buffer.nbytes} bytes, but miss_dst[{r}, {m}] = {dst} "
                     f"needs item {dst} of item_size_bytes = {item}")
            owner.setdefault(dst, []).append((r, m))
    repeated = sorted(d for d, where in owner.items() if len(where) > 1)
    fail(f"miss_dst holds device rows {repeated[:8]} more than once; "
         "two replayed copies into one row would race")


@remember_host_checks()
def planned_copy_host_checks(*, miss_src, miss_dst, miss_count, num_real_reqs, host_cache,
                             device_buffer, item_size_bytes, num_blocks, block_size,
                             skip_io=False) -> PlannedCopyCall:
    """The host part of :func:`check_planned_copy` (types, shapes, dtypes, layouts, scalars; no value
    inside an array), remembered for repeated calls on the same buffers."""
    if miss_src is None or miss_dst is None or miss_count is None:
        fail("miss_src, miss_dst, and miss_count must be provided together.")
    if num_real_reqs is None or isinstance(num_real_reqs, (int, np.integer)):
        fail(f"num_real_reqs must be an int32 array with shape [1], got {num_real_reqs}")
    for name, a in (("miss_src", miss_src), ("miss_dst", miss_dst), ("miss_count", miss_count),
                    ("num_real_reqs", num_real_reqs), ("host_cache", host_cache),
                    ("device_buffer", device_buffer)):
        require_array(name, a)
    if num_real_reqs.ndim != 1 or num_real_reqs.shape[0] != 1 or np.dtype(num_real_reqs.dtype) != np.int32:
        fail(f"num_real_reqs must be an int32 array with shape [1], got {describe(num_real_reqs)}")
    item = check_int("item_size_bytes", item_size_bytes)
    blocks = check_int("num_blocks", num_blocks)
    block = check_int("block_size", block_size)
    skip = check_flag("skip_io", skip_io)
    # The shape texts quote num_real_reqs: read it back only when one of them is raised.
    n = "?"
    if miss_src.ndim != 2 or miss_dst.ndim != 2 or miss_count.ndim != 1:
        n = int(device.to_host(num_real_reqs)[0])
    check_miss_plan(miss_src, miss_dst, miss_count, batch=0, capacity=0,
                    shape_message=_shape_message(n), count_message=_count_message(n))
    if blocks < 1:
        fail(f"num_blocks must be >= 1, got {num_blocks}")
    if blocks > MAX_GRID_BLOCKS:
        fail(f"num_blocks must be <= {MAX_GRID_BLOCKS} (CUDA's largest grid), got {num_blocks}")
    check_block_size(block)
    check_item_copy(item, host_cache, device_buffer)
    check_item_buffer("host_cache", host_cache, item, -1)
    check_item_buffer("device_buffer", device_buffer, item, -1)
    check_no_overlap({} if skip else {"device_buffer": device_buffer},
                     {"miss_src": miss_src, "miss_dst": miss_dst, "miss_count": miss_count,
                      "num_real_reqs": num_real_reqs, "host_cache": host_cache})
    call = PlannedCopyCall(
        num_real=None, num_blocks=blocks, block_size=block, skip_io=skip, item_size_bytes=item,
        miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count, num_real_reqs=num_real_reqs,
        host_cache=host_cache, device_buffer=device_buffer)
    return call


def check_planned_copy(*, miss_src, miss_dst, miss_count, num_real_reqs, host_cache,
                       device_buffer, item_size_bytes, num_blocks, block_size, skip_io=False,
                       checks="full", defer=False) -> PlannedCopyCall:
    """Every precondition of the replay, checked before anything is written; the accepted call.

    ``checks="shapes"`` skips the device-side value pass (``num_real`` of the call is then None).
    ``defer=True``: return once the value pass is enqueued; :func:`settle_planned_copy` takes its
    verdict after the launcher enqueued the gated kernel (as ``check_swap_in``).
    """
    full = check_mode(checks)
    call = planned_copy_host_checks(
        miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count,
        num_real_reqs=num_real_reqs, host_cache=host_cache, device_buffer=device_buffer,
        item_size_bytes=item_size_bytes, num_blocks=num_blocks, block_size=block_size,
        skip_io=skip_io)
    if full:
        call = attach_check(call, start_planned_copy_check(call), settle_planned_copy, defer)
    return call


def settle_planned_copy(call: PlannedCopyCall) -> PlannedCopyCall:
    """Wait for ``call``'s value check: raise its ``ValueError`` or return the settled call."""
    return settle(call, raise_planned_copy_flags, NUM_REAL_VALUE)
