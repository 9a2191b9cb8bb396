"""Fill hot-buffer rows from the host KV pool: the smallest HiSparse kernel.

For every pair ``i``, item ``src_locs[i]`` of the host pool is copied to row ``dst_locs[i]``
of the device buffer. This is the byte movement at the heart of every swap-in, without the
decisions about *which* items to move (those are ``swap_in.py`` and ``speculative.py``).

Launch geometry: one 32-thread group per pair, ``GROUPS_PER_BLOCK`` groups per block; a group
moves its item in 16-byte chunks (``itemcopy.copy_item_dev``). The host pool is read zero-copy over
PCIe when it is a ``device.host_cache_array``.

Read top-down: the NumPy reference, the kernel, the launchers (``launch_unchecked(call)`` launches
a :class:`GatherCall` that ``check_gather`` accepted, in ``gather_checks.py``;
``gather_to_hot_buffer`` is the two together). Lessons: 00 (the hot buffer), 10 (16-byte alignment), 11 (pageable
host pool).
"""

from __future__ import annotations

from .. import device
from ..device import cuda
from ..itemcopy import copy_item_dev, item_rows
from .gather_checks import GatherCall, check_gather, gather_flags_reference, raise_gather_flags

LANES = 32
GROUPS_PER_BLOCK = 8


def gather_to_hot_buffer_reference(*, host_cache, device_buffer, src_locs, dst_locs, item_size_bytes) -> None:
    """NumPy oracle: ``device_buffer`` item ``dst_locs[i]`` = ``host_cache`` item ``src_locs[i]``.

    host_cache, device_buffer: C-contiguous NumPy pools, item ``j`` at byte ``j * item_size_bytes``.
    src_locs, dst_locs: ``[n]`` int64. item_size_bytes: a multiple of 16.
    """
    call = check_gather(host_cache=host_cache, device_buffer=device_buffer, src_locs=src_locs,
                        dst_locs=dst_locs, item_size_bytes=item_size_bytes, checks="shapes")
    item = call.item_size_bytes
    raise_gather_flags(gather_flags_reference(src_locs, dst_locs, host_cache.nbytes // item,
                                              device_buffer.nbytes // item), call)
    host_items, device_items = item_rows(host_cache, item), item_rows(device_buffer, item)
    device_items[dst_locs] = host_items[src_locs]


@cuda.jit
def gather_kernel(src_words, dst_words, src_locs, dst_locs, words_per_item):
    group = cuda.blockIdx.x * GROUPS_PER_BLOCK + cuda.threadIdx.x // LANES
    if group < src_locs.shape[0]:
        copy_item_dev(src_words, src_locs[group], dst_words, dst_locs[group],
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


def gather_to_hot_buffer(*, host_cache, device_buffer, src_locs, dst_locs, item_size_bytes,
                         checks="full") -> None:
    """Copy host items ``src_locs`` into device rows ``dst_locs`` with a Numba CUDA kernel.

    host_cache: the host KV pool (``device.host_cache_array``), any shape and dtype.
    device_buffer: the device pool (CuPy on a GPU, NumPy in the simulator).
    src_locs, dst_locs: ``[n]`` int64 device arrays: sources in the host pool, destinations in the
    device pool and distinct (checked on the device in one pass unless ``checks="shapes"``, for
    callers that validated them upstream).
    """
    launch_unchecked(check_gather(host_cache=host_cache, device_buffer=device_buffer,
                                  src_locs=src_locs, dst_locs=dst_locs, item_size_bytes=item_size_bytes,
                                  checks=checks))
