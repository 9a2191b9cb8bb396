"""Launcher of the speculative swap-in: the public call, and the launch of a checked call.

``load_cache_to_device_buffer_spec_mla(..., version=None)`` runs ``check_speculative(...,
defer=True)`` (host checks and the device value pass enqueued, ``checks.py``), then
``launch_unchecked(call, version)``: the launch of rung ``version`` (``versions.py``; by default
the tuned ``v3_tuned``, on the grid ``tiling.geometry`` sizes) behind the pass's gate; then
``settle_speculative(call)`` takes the verdict. Lessons 01, 03, 04 and 08 call it, and
``launch_unchecked`` where they show what a check prevents.
"""

from __future__ import annotations

import functools

import numpy as np

from ... import device
from ...checks import launch_then_settle
from .checks import SpecCall, check_speculative, settle_speculative
from .tiling import Workspace, clear_workspace, geometry, kernel_args, workspace
from .versions import check_version, module


def load_cache_to_device_buffer_spec_mla(
        *, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, state, num_real_reqs,
        miss_src=None, miss_dst=None, miss_count=None, item_size_bytes=None,
        checks="full", version=None) -> None:
    """Resolve all ``steps * top_k`` occurrences of each request in one launch.

    top_k_tokens: ``[batch, steps, top_k]`` int32, 2 <= steps <= 4, steps * top_k <= 8192, dense
    rows. device_buffer_tokens / device_buffer_locs: ``[num_requests, H + tail]`` int32 (same
    layout; mutated). host_cache_locs: ``[num_requests, max_positions]`` int64, row-contiguous.
    host_cache: the host pool (``device.host_cache_array``), item ``i`` at byte
    ``i * item_size_bytes``; device_buffer: the device pool (mutated). top_k_device_locs:
    ``[batch, steps, top_k]`` int32 output. req_pool_indices: ``[batch]`` int64, distinct.
    seq_lens: ``[batch * steps]`` int32, ``b * steps + step``. state: ``HiSparseSpecState``
    (mutated). num_real_reqs: ``[>= 1]`` int32 device array. miss_src ``[>= batch, >= steps *
    top_k]`` int64, miss_dst the same in int32 with the same row stride, miss_count ``[>= batch]``
    int32: all three or none. item_size_bytes: defaults to host_cache's row size in bytes; a
    multiple of 16.

    checks: ``"full"`` (default) checks every value the kernel indexes with on the device first
    (``value_checks.py``, docs/speculative-swap-in.md "What a call must satisfy"), so a bad call
    raises a ValueError and writes nothing; ``"shapes"`` checks shapes, dtypes and scalars only,
    for callers who validated the values upstream (a bad value then corrupts memory or state).

    version: the kernel's rung (``versions.VERSIONS``; None: the tuned one); every rung computes
    the same outputs and state.
    """
    number = check_version(version)
    call = check_speculative(
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens, host_cache_locs=host_cache_locs,
        device_buffer_locs=device_buffer_locs, host_cache=host_cache, device_buffer=device_buffer,
        top_k_device_locs=top_k_device_locs, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
        state=state, num_real_reqs=num_real_reqs, miss_src=miss_src, miss_dst=miss_dst,
        miss_count=miss_count, item_size_bytes=item_size_bytes,
        checks=checks, for_kernel=True, defer=True)
    launch = functools.partial(launch_unchecked, version=number)
    launch_then_settle(call, launch, settle_speculative)   # gated kernel, then the verdict


def launch_unchecked(call: SpecCall, version=None) -> None:
    """The launch of a checked call *without* any further check, on rung ``version`` (None: the
    tuned one).

    For lessons that show what a check prevents (``check_speculative(**valid)._replace(...)``)
    and for the benchmark (which times repeated calls on checked arguments); everything else
    calls the launcher.
    """
    version = check_version(version)
    if call.batch == 0:
        return
    module(version).launch(call)


__all__ = ["Workspace", "clear_workspace", "geometry", "kernel_args", "launch_unchecked",
           "load_cache_to_device_buffer_spec_mla", "workspace"]
