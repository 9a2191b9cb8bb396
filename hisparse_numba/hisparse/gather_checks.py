"""The preconditions of the gather (``gather.py``), checked before anything is written.

Shapes, dtypes and Python types are checked on the host; the locations are checked on the device
in one pass (:func:`gather_value_flags`: one kernel launch, one 136-byte verdict read from pinned memory): every source
names an item of the host pool, every destination an item of the device pool, and no two
destinations are the same row (two copies into one row race). :func:`gather_flags_reference` is the
same verdict in NumPy. Lessons: 00 (the hot buffer), 10 (16-byte alignment).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import device, value_flags
from ..checks import (check_dtype, check_int, check_item_buffer, check_item_copy, check_mode, check_ndim,
                      check_no_overlap, fail, require_array)
from ..device import cuda
from ..value_flags import claim_epoch_dev, finish_check_dev, flag_bad_dev

SOURCE_OUT_OF_POOL, DESTINATION_OUT_OF_POOL, DESTINATION_TWICE = 0, 1, 2
CHECK_BLOCK = 32 if device.SIMULATOR else 256   # the simulator runs each thread as a Python thread


class GatherCall(NamedTuple):
    """One accepted gather: every array of the call (see ``SwapInCall``)."""

    host_cache: object
    device_buffer: object
    src_locs: object
    dst_locs: object
    item_size_bytes: int


def gather_flags_reference(src_locs, dst_locs, host_items: int, device_items: int) -> list:
    """NumPy verdict of the value check: ``[(count, first index), ...]`` per condition, as
    ``value_flags.check_flags`` returns it (the first index of ``DESTINATION_TWICE`` is any one of
    the repeated entries on the device)."""
    src, dst = np.asarray(src_locs), np.asarray(dst_locs)
    flags = [(0, -1)] * value_flags.CHECK_CONDITIONS

    def put(condition, bad):
        where = np.flatnonzero(bad)
        flags[condition] = (int(where.size), int(where[0]) if where.size else -1)

    put(SOURCE_OUT_OF_POOL, (src < 0) | (src >= host_items))
    inside = (dst >= 0) & (dst < device_items)
    put(DESTINATION_OUT_OF_POOL, ~inside)
    repeated = np.zeros(dst.size, bool)
    _, first = np.unique(dst[inside], return_index=True)
    repeated[np.flatnonzero(inside)] = True
    repeated[np.flatnonzero(inside)[first]] = False
    put(DESTINATION_TWICE, repeated)
    return flags


@cuda.jit(device=True, inline=True)
def gather_check_dev(src_locs, dst_locs, host_items, device_items, claims, flags):
    epoch = claim_epoch_dev(flags)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= src_locs.shape[0]:
        return
    src, dst = src_locs[i], dst_locs[i]
    if src < 0 or src >= host_items:
        flag_bad_dev(flags, SOURCE_OUT_OF_POOL, i)
    if dst < 0 or dst >= device_items:
        flag_bad_dev(flags, DESTINATION_OUT_OF_POOL, i)
    elif cuda.atomic.exch(claims, dst, epoch) == epoch:
        flag_bad_dev(flags, DESTINATION_TWICE, i)


@cuda.jit
def gather_check_kernel(src_locs, dst_locs, host_items, device_items, claims, flags, verdict):
    gather_check_dev(src_locs, dst_locs, host_items, device_items, claims, flags)
    finish_check_dev(flags, verdict)


def gather_value_flags(src_locs, dst_locs, host_items: int, device_items: int) -> list:
    """The device-side value check (one launch, one read-back); the verdict as the reference's."""
    n = int(src_locs.shape[0])
    claims = value_flags.claim_table(device_items)
    return value_flags.check_flags(gather_check_kernel, (n + CHECK_BLOCK - 1) // CHECK_BLOCK, CHECK_BLOCK,
                                   src_locs, dst_locs, np.int64(host_items), np.int64(device_items),
                                   claims)


def raise_gather_flags(flags, call: GatherCall) -> None:
    """The ``ValueError`` of the first failed condition (reads the offending entry back)."""
    item = call.item_size_bytes
    for condition, pool, locs in ((SOURCE_OUT_OF_POOL, "host_cache", "src_locs"),
                                  (DESTINATION_OUT_OF_POOL, "device_buffer", "dst_locs")):
        count, i = flags[condition]
        if count:
            loc = int(device.to_host(getattr(call, locs)[i:i + 1])[0])
            if loc < 0:
                fail("src_locs and dst_locs must be >= 0 (a -1 location has no item)")
            fail(f"{pool} holds {getattr(call, pool).nbytes} bytes, but {locs}[{i}] = {loc} needs "
                 f"item {loc} of item_size_bytes = {item}")
    if flags[DESTINATION_TWICE][0]:
        fail("dst_locs must be distinct: two items copied to one row race")


def check_gather(*, host_cache, device_buffer, src_locs, dst_locs, item_size_bytes,
                 checks="full") -> GatherCall:
    """Every precondition of the gather, checked before anything is written; the accepted call.

    ``checks="shapes"`` skips the device-side check of the locations (for callers that
    validated them upstream).
    """
    full = check_mode(checks)
    for name, a in (("host_cache", host_cache), ("device_buffer", device_buffer),
                    ("src_locs", src_locs), ("dst_locs", dst_locs)):
        require_array(name, a)
    item = check_int("item_size_bytes", item_size_bytes)
    for name, locs in (("src_locs", src_locs), ("dst_locs", dst_locs)):
        check_ndim(name, locs, 1, "[n]")
        check_dtype(name, locs, np.int64)
    if src_locs.shape != dst_locs.shape:
        fail(f"src_locs and dst_locs must have the same shape, got {src_locs.shape} and {dst_locs.shape}")
    check_item_copy(item, host_cache, device_buffer)
    check_item_buffer("host_cache", host_cache, item, -1)
    check_item_buffer("device_buffer", device_buffer, item, -1)
    check_no_overlap({"device_buffer": device_buffer},
                     {"host_cache": host_cache, "src_locs": src_locs, "dst_locs": dst_locs})
    call = GatherCall(host_cache, device_buffer, src_locs, dst_locs, item)
    if full and src_locs.shape[0]:
        host_items, device_items = host_cache.nbytes // item, device_buffer.nbytes // item
        raise_gather_flags(gather_value_flags(src_locs, dst_locs, host_items, device_items), call)
    return call
