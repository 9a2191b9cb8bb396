"""Fill hot-buffer rows from the host KV pool: the smallest HiSparse kernel.

For every pair ``i``, item ``src_locs[i]`` of the host pool is copied to row ``dst_locs[i]``
of the device buffer. This is the byte movement at the heart of every swap-in, without the
decisions about *which* items to move (those are ``swap_in.py`` and ``speculative.py``).

Launch geometry: one 32-thread group per pair, ``GROUPS_PER_BLOCK`` groups per block; a group
moves its item in 16-byte chunks (``itemcopy.copy_item``). The host pool is read zero-copy over
PCIe when it is a ``device.host_cache_array``.

Read top-down: the NumPy reference, the kernel, the launchers (``launch_unchecked(call)`` launches
a :class:`GatherCall` that ``check_gather`` accepted; ``gather_to_hot_buffer`` is the two
together), then the check. Lessons: 00 (the hot buffer), 10 (16-byte alignment), 11 (pageable
host pool).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import device
from ..checks import check_dtype, check_item_buffer, check_item_copy, check_ndim, fail
from ..device import cuda
from ..itemcopy import copy_item

LANES = 32
GROUPS_PER_BLOCK = 8


class GatherCall(NamedTuple):
    """One accepted gather: every array of the call (see ``SwapInCall``)."""

    host_cache: object
    device_buffer: object
    src_locs: object
    dst_locs: object
    item_size_bytes: int


def gather_to_hot_buffer_reference(*, host_cache, device_buffer, src_locs, dst_locs, item_size_bytes) -> None:
    """NumPy oracle: ``device_buffer`` item ``dst_locs[i]`` = ``host_cache`` item ``src_locs[i]``.

    host_cache, device_buffer: C-contiguous NumPy pools, item ``j`` at byte ``j * item_size_bytes``.
    src_locs, dst_locs: ``[n]`` int64. item_size_bytes: a multiple of 16.
    """
    check_gather(host_cache=host_cache, device_buffer=device_buffer, src_locs=src_locs,
                 dst_locs=dst_locs, item_size_bytes=item_size_bytes)
    src = host_cache.reshape(-1).view(np.uint8)
    dst = device_buffer.reshape(-1).view(np.uint8)
    for s, d in zip(src_locs, dst_locs):
        dst[d * item_size_bytes:(d + 1) * item_size_bytes] = src[s * item_size_bytes:(s + 1) * item_size_bytes]


@cuda.jit
def gather_kernel(src_words, dst_words, src_locs, dst_locs, words_per_item):
    group = cuda.blockIdx.x * GROUPS_PER_BLOCK + cuda.threadIdx.x // LANES
    if group < src_locs.shape[0]:
        copy_item(src_words, src_locs[group], dst_words, dst_locs[group],
                  words_per_item, cuda.threadIdx.x % LANES, LANES)


def launch_unchecked(call: GatherCall) -> None:
    """Launch the gather on ``call`` as it is: no checks (``call`` from :func:`check_gather`, or
    built by hand in a lesson that shows what an unchecked input does)."""
    n = int(call.src_locs.shape[0])
    if n == 0:
        return
    blocks = (n + GROUPS_PER_BLOCK - 1) // GROUPS_PER_BLOCK
    device.launch(gather_kernel, blocks, GROUPS_PER_BLOCK * LANES,
                  device.byte_words(call.host_cache), device.byte_words(call.device_buffer),
                  call.src_locs, call.dst_locs, call.item_size_bytes // 8)


def gather_to_hot_buffer(*, host_cache, device_buffer, src_locs, dst_locs, item_size_bytes) -> None:
    """Copy host items ``src_locs`` into device rows ``dst_locs`` with a Numba CUDA kernel.

    host_cache: the host KV pool (``device.host_cache_array``), any shape and dtype.
    device_buffer: the device pool (CuPy on a GPU, NumPy in the simulator).
    src_locs, dst_locs: ``[n]`` int64 device arrays, ``dst_locs`` distinct.
    """
    launch_unchecked(check_gather(host_cache=host_cache, device_buffer=device_buffer,
                                  src_locs=src_locs, dst_locs=dst_locs, item_size_bytes=item_size_bytes))


def check_gather(*, host_cache, device_buffer, src_locs, dst_locs, item_size_bytes) -> GatherCall:
    """Every precondition of the gather, checked before anything is written; the accepted call."""
    for name, locs in (("src_locs", src_locs), ("dst_locs", dst_locs)):
        check_ndim(name, locs, 1, "[n]")
        check_dtype(name, locs, np.int64)
    if src_locs.shape != dst_locs.shape:
        fail(f"src_locs and dst_locs must have the same shape, got {src_locs.shape} and {dst_locs.shape}")
    check_item_copy(item_size_bytes, host_cache, device_buffer)
    src, dst = device.to_host(src_locs), device.to_host(dst_locs)
    if src.size and (src.min() < 0 or dst.min() < 0):
        fail("src_locs and dst_locs must be >= 0 (a -1 location has no item)")
    if len(np.unique(dst)) != dst.size:
        fail("dst_locs must be distinct: two items copied to one row race")
    check_item_buffer("host_cache", host_cache, item_size_bytes, int(src.max()) if src.size else -1)
    check_item_buffer("device_buffer", device_buffer, item_size_bytes, int(dst.max()) if dst.size else -1)
    return GatherCall(host_cache, device_buffer, src_locs, dst_locs, int(item_size_bytes))
