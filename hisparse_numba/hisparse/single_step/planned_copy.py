"""Replay of a recorded miss plan: the item copies of a swap-in, without its decisions.

The fused swap-in (``swap_in.py``) can record, per batch row ``r``, the ``miss_count[r]``
copies it made: host row ``miss_src[r, m]`` -> device row ``miss_dst[r, m]``. Layers that share
the anchor layer's top-k selection and slot tables (lockstep) replay that plan into their own
pools with :func:`copy_cache_planned_mla`: no hashing, no LRU, no tag updates. Only rows
``r < num_real_reqs[0]`` are replayed (plan buffers are reused across batch sizes, so rows
past the current batch hold stale entries).

Launch geometry: ``num_blocks`` blocks of ``block_size`` threads (fewer when their groups would
outnumber the plan's entries, :func:`blocks_used`) form ``T = blocks * block_size / 32`` groups of
32 lanes. The entries ``(r, m)`` in row-major
order get a flat index ``g``; group ``w`` copies exactly the entries with ``g % T == w`` (a
bijection: every entry is copied once), each item with ``itemcopy.copy_item_dev``.

Read top-down: the NumPy reference, the kernel, the launchers (``launch_unchecked(call)`` launches
a :class:`PlannedCopyCall` that ``check_planned_copy`` accepted, in ``planned_copy_checks.py``;
``copy_cache_planned_mla`` is the two together). Lessons: 00, 01, 05 (plan dtypes), 06 (plan and replay
together), 08 (padded batches), 13 (capstone).
"""

from __future__ import annotations

import functools

from ... import device, value_flags
from ...checks import launch_then_settle
from ...device import cuda
from ...value_flags import gate_closed_dev
from ...itemcopy import copy_item_dev, item_rows
from .planned_copy_checks import (NUM_REAL_VALUE, PlannedCopyCall, check_planned_copy, plan_columns,
                                  plan_rows, planned_copy_flags_reference, raise_planned_copy_flags,
                                  settle_planned_copy)

LANES = 32


def copy_cache_planned_mla_reference(*, miss_src, miss_dst, miss_count, num_real_reqs,
                                     host_cache, device_buffer, item_size_bytes, num_blocks=4,
                                     block_size=1024, skip_io=False) -> None:
    """NumPy oracle of :func:`copy_cache_planned_mla` (same keywords; mutates ``device_buffer``)."""
    call = check_planned_copy(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count,
                              num_real_reqs=num_real_reqs, host_cache=host_cache,
                              device_buffer=device_buffer, item_size_bytes=item_size_bytes,
                              num_blocks=num_blocks, block_size=block_size, skip_io=skip_io,
                              checks="shapes")
    flags = planned_copy_flags_reference(call)
    raise_planned_copy_flags(flags, call)
    if call.skip_io:
        return
    item = call.item_size_bytes
    host_items, device_items = item_rows(host_cache, item), item_rows(device_buffer, item)
    for r in range(flags[NUM_REAL_VALUE][1]):
        n = int(miss_count[r])
        device_items[miss_dst[r, :n]] = host_items[miss_src[r, :n]]


@functools.cache
def planned_copy_kernel(skip_io: bool):
    @cuda.jit
    def kernel(miss_src, miss_dst, miss_count, num_real_reqs, host_words, device_words,
               words_per_item, gate):
        if gate_closed_dev(gate):                  # the call's value check rejected it
            return
        gtid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        group = gtid // LANES
        lane = gtid % LANES
        groups = (cuda.gridDim.x * cuda.blockDim.x) // LANES
        start = 0                                  # flat index of the row's first entry, mod groups
        for r in range(num_real_reqs[0]):
            count = miss_count[r]
            m = (group - start + groups) % groups  # this group's first entry of row r
            while m < count:
                if not skip_io:
                    copy_item_dev(host_words, miss_src[r, m], device_words, miss_dst[r, m],
                              words_per_item, lane, LANES)
                m += groups
            start = (start + count) % groups
    return kernel


def blocks_used(call: PlannedCopyCall) -> int:
    """``num_blocks``, or fewer when its groups outnumber the plan's entries (``rows * columns``):
    the extra groups would only idle, and the copies do not depend on the number of groups."""
    groups = max(1, plan_rows(call) * plan_columns(call))
    return max(1, min(call.num_blocks, -(-groups * LANES // call.block_size)))


def launch_unchecked(call: PlannedCopyCall) -> None:
    """Launch the replay on ``call`` as it is: no checks (``call`` from :func:`check_planned_copy`,
    or built by hand in a lesson that shows what an unchecked plan does)."""
    if call.num_real == 0:
        return
    device.launch(planned_copy_kernel(call.skip_io), blocks_used(call), call.block_size, call.miss_src,
                  call.miss_dst, call.miss_count, call.num_real_reqs, device.byte_words(call.host_cache),
                  device.byte_words(call.device_buffer), call.item_size_bytes // 8,
                  value_flags.open_gate() if call.gate is None else call.gate)


def copy_cache_planned_mla(*, miss_src, miss_dst, miss_count, num_real_reqs, host_cache,
                           device_buffer, item_size_bytes, num_blocks=4, block_size=1024,
                           skip_io=False, checks="full") -> None:
    """Replay a recorded miss plan into ``device_buffer`` (sglang's ``copy_cache_planned_mla``).

    miss_src ``[>= n, C]`` int64 host rows, miss_dst ``[>= n, C]`` int32 device rows (same row
    stride), miss_count ``[>= n]`` int32 with values in ``[0, C]``, num_real_reqs ``[1]`` int32
    holding ``n``. host_cache / device_buffer: C-contiguous pools, item ``i`` at byte
    ``i * item_size_bytes`` (a multiple of 16, 16-byte aligned bases). Live destinations must
    be distinct. ``skip_io`` walks the plan without moving bytes.

    ``checks="full"`` (default) checks the live entries on the device in one pass before anything
    is written (``planned_copy_checks``); ``checks="shapes"`` skips that pass, for callers that
    replay a plan they know the swap-in recorded.
    """
    call = check_planned_copy(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count,
                              num_real_reqs=num_real_reqs, host_cache=host_cache,
                              device_buffer=device_buffer, item_size_bytes=item_size_bytes,
                              num_blocks=num_blocks, block_size=block_size, skip_io=skip_io,
                              checks=checks, defer=True)
    launch_then_settle(call, launch_unchecked, settle_planned_copy)   # gated kernel, then the verdict
