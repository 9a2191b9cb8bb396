"""Replay of a recorded miss plan: the item copies of a swap-in, without its decisions.

The fused swap-in (``swap_in.py``) can record, per batch row ``r``, the ``miss_count[r]``
copies it made: host row ``miss_src[r, m]`` -> device row ``miss_dst[r, m]``. Layers that share
the anchor layer's top-k selection and slot tables (lockstep) replay that plan into their own
pools with :func:`copy_cache_planned_mla`: no hashing, no LRU, no tag updates. Only rows
``r < num_real_reqs[0]`` are replayed (plan buffers are reused across batch sizes, so rows
past the current batch hold stale entries).

Launch geometry: ``num_blocks`` blocks of ``block_size`` threads form
``T = num_blocks * block_size / 32`` groups of 32 lanes. The entries ``(r, m)`` in row-major
order get a flat index ``g``; group ``w`` copies exactly the entries with ``g % T == w`` (a
bijection: every entry is copied once), each item with ``itemcopy.copy_item``.

Read top-down: the NumPy reference, the kernel, the launchers (``launch_unchecked(call)`` launches
a :class:`PlannedCopyCall` that ``check_planned_copy`` accepted; ``copy_cache_planned_mla`` is the
two together), then the checks. Lessons: 00, 01, 05 (plan dtypes), 06 (plan and replay
together), 08 (padded batches), 13 (capstone).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .. import device
from ..checks import (check_block_size, check_item_buffer, check_item_copy, check_miss_plan, describe,
                      fail)
from ..device import cuda
from ..itemcopy import copy_item

LANES = 32


class PlannedCopyCall(NamedTuple):
    """One accepted replay: the configuration and every array of the call (see ``SwapInCall``)."""

    num_real: int              # rows replayed: num_real_reqs[0]
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


def copy_cache_planned_mla_reference(*, miss_src, miss_dst, miss_count, num_real_reqs,
                                     host_cache, device_buffer, item_size_bytes, num_blocks=4,
                                     block_size=1024, skip_io=False) -> None:
    """NumPy oracle of :func:`copy_cache_planned_mla` (same keywords; mutates ``device_buffer``)."""
    call = check_planned_copy(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count,
                              num_real_reqs=num_real_reqs, host_cache=host_cache,
                              device_buffer=device_buffer, item_size_bytes=item_size_bytes,
                              num_blocks=num_blocks, block_size=block_size, skip_io=skip_io)
    if call.skip_io:
        return
    item = call.item_size_bytes
    host_bytes = host_cache.reshape(-1).view(np.uint8)
    dev_bytes = device_buffer.reshape(-1).view(np.uint8)
    for r in range(call.num_real):
        for m in range(int(miss_count[r])):
            s, d = int(miss_src[r, m]), int(miss_dst[r, m])
            dev_bytes[d * item:(d + 1) * item] = host_bytes[s * item:(s + 1) * item]


@functools.cache
def planned_copy_kernel(skip_io: bool):
    @cuda.jit
    def kernel(miss_src, miss_dst, miss_count, num_real_reqs, host_words, device_words,
               words_per_item):
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
                    copy_item(host_words, miss_src[r, m], device_words, miss_dst[r, m],
                              words_per_item, lane, LANES)
                m += groups
            start = (start + count) % groups
    return kernel


def launch_unchecked(call: PlannedCopyCall) -> None:
    """Launch the replay on ``call`` as it is: no checks (``call`` from :func:`check_planned_copy`,
    or built by hand in a lesson that shows what an unchecked plan does)."""
    if call.num_real == 0:
        return
    device.launch(planned_copy_kernel(call.skip_io), call.num_blocks, call.block_size, call.miss_src,
                  call.miss_dst, call.miss_count, call.num_real_reqs, device.byte_words(call.host_cache),
                  device.byte_words(call.device_buffer), call.item_size_bytes // 8)


def copy_cache_planned_mla(*, miss_src, miss_dst, miss_count, num_real_reqs, host_cache,
                           device_buffer, item_size_bytes, num_blocks=4, block_size=1024,
                           skip_io=False) -> None:
    """Replay a recorded miss plan into ``device_buffer`` (sglang's ``copy_cache_planned_mla``).

    miss_src ``[>= n, C]`` int64 host rows, miss_dst ``[>= n, C]`` int32 device rows (same row
    stride), miss_count ``[>= n]`` int32 with values in ``[0, C]``, num_real_reqs ``[1]`` int32
    holding ``n``. host_cache / device_buffer: C-contiguous pools, item ``i`` at byte
    ``i * item_size_bytes`` (a multiple of 16, 16-byte aligned bases). Live destinations must
    be distinct. ``skip_io`` walks the plan without moving bytes.
    """
    call = check_planned_copy(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count,
                              num_real_reqs=num_real_reqs, host_cache=host_cache,
                              device_buffer=device_buffer, item_size_bytes=item_size_bytes,
                              num_blocks=num_blocks, block_size=block_size, skip_io=skip_io)
    launch_unchecked(call)


def check_planned_copy(*, miss_src, miss_dst, miss_count, num_real_reqs, host_cache,
                       device_buffer, item_size_bytes, num_blocks, block_size, skip_io=False) -> PlannedCopyCall:
    """Every precondition of the replay, checked before anything is written; the accepted call."""
    if miss_src is None or miss_dst is None or miss_count is None:
        fail("miss_src, miss_dst, and miss_count must be provided together.")
    if num_real_reqs is None or isinstance(num_real_reqs, (int, np.integer)) or \
            num_real_reqs.ndim != 1 or num_real_reqs.shape[0] != 1 or \
            np.dtype(num_real_reqs.dtype) != np.int32:
        got = num_real_reqs if num_real_reqs is None or isinstance(num_real_reqs, (int, np.integer)) \
            else describe(num_real_reqs)
        fail(f"num_real_reqs must be an int32 array with shape [1], got {got}")
    num_real = int(device.to_host(num_real_reqs)[0])
    if num_real < 0:
        fail(f"num_real_reqs[0] = {num_real} must be >= 0")
    check_miss_plan(
        miss_src, miss_dst, miss_count, batch=num_real, capacity=0,
        shape_message=f"miss_src/miss_dst must have shape [>= num_real_reqs ({num_real}), max misses].",
        count_message=f"miss_count must have shape [>= num_real_reqs ({num_real})].")
    if int(num_blocks) < 1:
        fail(f"num_blocks must be >= 1, got {num_blocks}")
    check_block_size(block_size)
    check_item_copy(item_size_bytes, host_cache, device_buffer)
    check_item_buffer("host_cache", host_cache, item_size_bytes, -1)
    check_item_buffer("device_buffer", device_buffer, item_size_bytes, -1)
    call = PlannedCopyCall(
        num_real=num_real, num_blocks=int(num_blocks), block_size=int(block_size),
        skip_io=bool(skip_io), item_size_bytes=int(item_size_bytes), miss_src=miss_src,
        miss_dst=miss_dst, miss_count=miss_count, num_real_reqs=num_real_reqs,
        host_cache=host_cache, device_buffer=device_buffer)
    if num_real == 0:
        return call
    counts = device.to_host(miss_count[:num_real]).astype(np.int64)
    cols = int(miss_src.shape[1])
    bad = np.flatnonzero((counts < 0) | (counts > cols))
    if bad.size:
        r = int(bad[0])
        fail(f"miss_count[{r}] = {counts[r]} is outside [0, {cols}] (the plan's columns)")
    live = np.arange(cols)[None, :] < counts[:, None]
    src = device.to_host(miss_src[:num_real])[live]
    dst = device.to_host(miss_dst[:num_real])[live]
    if src.size:
        if src.min() < 0 or dst.min() < 0:
            fail("miss_src and miss_dst entries below miss_count must be >= 0 (a -1 row has no item)")
        values, c = np.unique(dst, return_counts=True)
        if (c > 1).any():
            fail(f"miss_dst holds device rows {values[c > 1][:8].tolist()} more than once; "
                 "two replayed copies into one row would race")
        check_item_buffer("host_cache", host_cache, item_size_bytes, int(src.max()))
        check_item_buffer("device_buffer", device_buffer, item_size_bytes, int(dst.max()))
    return call
