"""Launching the single-step swap-in: the kernel's arguments, the unchecked launch, the launcher.

``launch_unchecked(call)`` launches a :class:`SwapInCall` that ``check_swap_in`` accepted;
``load_cache_to_device_buffer_mla`` is the two together. Both take ``version=``, the rung of the
kernel ladder to launch (``versions.py``; default: the tuned one).
"""

from __future__ import annotations

import functools

from ... import device, value_flags
from ...checks import fail, launch_then_settle
from ..miss_plan import placeholder_plan
from . import versions
from .checks import SwapInCall, check_swap_in, settle_swap_in

STATIC_SHARED_LIMIT = 48 * 1024   # static shared arrays of one block, on every architecture


def kernel_args(call: SwapInCall) -> tuple:
    """The kernel's argument tuple for ``call``, each array converted once (``device.kernel_array``).

    A caller that launches the same arrays many times (the benchmark) builds it once and passes it
    to :func:`launch_unchecked`, so that no launch pays the conversions.
    """
    miss_src, miss_dst, miss_count = call.miss_src, call.miss_dst, call.miss_count
    if not call.record_plan:
        miss_src, miss_dst, miss_count = placeholder_plan()
    arrays = (call.top_k_tokens, call.device_buffer_tokens, call.host_cache_locs,
              call.device_buffer_locs, device.byte_words(call.host_cache),
              device.byte_words(call.device_buffer), call.top_k_device_locs, call.req_pool_indices,
              call.seq_lens, call.lru_slots, call.num_real_reqs, miss_src, miss_dst, miss_count)
    gate = value_flags.open_gate() if call.gate is None else call.gate
    return tuple(device.kernel_array(a) for a in arrays) + (call.item_size_bytes // 8, gate)


@functools.cache
def check_fits(number: int, num_top_k: int, hot_buffer_size: int, block_size: int) -> None:
    """ValueError when rung ``number``'s static shared memory at these sizes passes 48 KiB: the GPU
    compiler would reject the kernel (ptxas: "uses too much shared data"), the simulator not.
    Cached: a decode loop pays it once per configuration (a raise is not cached)."""
    need = versions.module(number).shared_memory_bytes(num_top_k, hot_buffer_size, block_size)
    if need > STATIC_SHARED_LIMIT:
        fail(f"version {number} needs {need} bytes of static shared memory at num_top_k={num_top_k}, "
             f"hot_buffer_size={hot_buffer_size}, block_size={block_size}; the limit is "
             f"{STATIC_SHARED_LIMIT} (48 KiB): use a smaller size or version {versions.DEFAULT}")


@functools.cache
def _factory(number: int):
    return versions.module(number).swap_in_kernel


def launch_unchecked(call: SwapInCall, prepared_args: tuple | None = None, version=None) -> None:
    """Launch the swap-in kernel on ``call`` as it is: no checks of its values.

    ``call`` comes from :func:`check_swap_in` (the public launcher does exactly that), or is built
    by hand in a lesson that shows what an unchecked input does. ``prepared_args``: the tuple of
    :func:`kernel_args` for this call, when the caller converted it already. ``version``: the rung
    (``versions.py``; None: the tuned one), checked with its shared memory before any launch.
    """
    number = versions.check_version(version)
    check_fits(number, call.num_top_k, call.hot_buffer_size, call.block_size)
    if call.batch == 0:
        return
    kernel = _factory(number)(call.num_top_k, call.hot_buffer_size, call.block_size, call.record_plan,
                              call.skip_io)
    args = kernel_args(call) if prepared_args is None else prepared_args
    device.launch(kernel, call.batch, call.block_size, *args)


def load_cache_to_device_buffer_mla(
        top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots,
        item_size_bytes, num_top_k, hot_buffer_size, page_size=1, block_size=256,
        num_real_reqs=None, miss_src=None, miss_dst=None, miss_count=None, skip_io=False,
        checks="full", version=None) -> None:
    """Single-step LRU swap-in (sglang's ``load_cache_to_device_buffer_mla``).

    Shapes and dtypes (``B`` batch rows, ``R`` request rows, ``K = num_top_k``,
    ``H = hot_buffer_size``; device arrays unless stated):

    * ``top_k_tokens`` ``[B, K]`` int32 (inner stride 1; a column slice of a wider table is fine);
    * ``device_buffer_tokens`` ``[R, >= H]`` int32 and ``device_buffer_locs`` ``[R, >= H+1]``
      int32 with equal row strides; ``lru_slots`` ``[R, >= H]`` int16 permutations;
    * ``host_cache_locs`` ``[R, S]`` int64, C-contiguous;
    * ``host_cache``: the host pool (``device.host_cache_array``), ``device_buffer``: the device
      pool; both C-contiguous, item ``i`` at byte ``i * item_size_bytes`` (a multiple of 16);
    * ``top_k_device_locs`` ``[B, >= K]`` int32 output; ``req_pool_indices``, ``seq_lens``
      ``[B]`` int32 or int64; ``num_real_reqs`` ``[1]`` int32 (None: all rows are real);
    * optional plan: ``miss_src`` ``[>= B, >= K]`` int64, ``miss_dst`` ``[>= B, >= K]`` int32 with
      the same row stride, ``miss_count`` ``[>= B]`` int32.

    Long-path rows must select K distinct positions in ``[0, seq_len)``, each miss with a host
    backup; every real row owns its request row, and every hot slot its own device row.
    ``page_size`` is unused (as in sglang). ``skip_io`` plans without moving bytes.

    ``checks="full"`` (default) proves every value the kernel indexes with on the device, in one
    pass, before anything is written (``checks``); ``checks="shapes"`` skips that pass, for
    callers that validated the values upstream: an invalid value then corrupts memory silently.
    ``version``: the rung of the kernel ladder (``versions.py``; None: the tuned one).
    """
    number = versions.check_version(version)
    call = check_swap_in(
        top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots, item_size_bytes,
        num_top_k, hot_buffer_size, page_size, block_size, num_real_reqs, miss_src, miss_dst,
        miss_count, skip_io, checks, defer=True)
    launch = functools.partial(launch_unchecked, version=number)
    launch_then_settle(call, launch, settle_swap_in)   # gated kernel, then the verdict
