"""Arguments of the speculative swap-in: every check, and the checked call (``SpecCall``).

``check_speculative`` takes the launcher's keywords, raises a ValueError naming the argument
before anything is written (sglang's text where sglang has one), and returns a ``SpecCall``
holding the derived sizes and every array. Shapes and dtypes: ``launch.py``. Lessons 01, 03, 04
and 08 teach the checks of this family.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import device
from ...checks import (attach_check, check_dtype, check_inner_contiguous, check_int, check_item_copy,
                       check_miss_plan, check_mode, check_ndim, check_no_overlap, fail,
                       remember_host_checks, require_array, row_stride, settle)
from .state import MAX_OCCURRENCES, check_state
from .value_checks import raise_value_flags, start_value_checks, value_checks


def steps_message(num_steps) -> str:
    return f"HiSparse speculative swap requires 2-4 steps, got {num_steps}."


def plan_shape_message(plan_capacity) -> str:
    return (f"speculative miss_src/miss_dst must have shape [batch, >= steps * top_k] "
            f"(capacity {plan_capacity}).")


COUNT_MESSAGE = "speculative miss_count must have shape [batch]."


class SpecCall(NamedTuple):
    """One checked call: the configuration derived from the arguments, then every array.

    ``launch_unchecked(call)`` needs nothing else. A lesson that shows what a check prevents
    changes a checked call with ``_replace`` (e.g. a shorter ``miss_src``) and launches that.
    """

    batch: int
    steps: int
    top_k: int
    hot: int                    # H, the hot buffer size (state.cache_policy's width)
    tail: int                   # active tail columns after the H hot slots
    num_requests: int           # request slots of the state
    capacity: int               # scratch capacity per request
    item_size_bytes: int
    record: bool                # whether the miss plan is written
    top_k_tokens: object            # [batch, steps, top_k]
    device_buffer_tokens: object    # [num_requests, H + tail]
    host_cache_locs: object         # [num_requests, max_positions]
    device_buffer_locs: object      # [num_requests, H + tail]
    host_cache: object              # [items, ...]
    device_buffer: object           # [items, ...]
    top_k_device_locs: object       # [batch, steps, top_k]
    req_pool_indices: object        # [batch]
    seq_lens: object                # [batch * steps]
    state: object                   # HiSparseSpecState
    num_real_reqs: object           # [>= 1]
    miss_src: object                # [batch, >= steps * top_k] (None when record is False)
    miss_dst: object                # as miss_src
    miss_count: object              # [batch]
    gate: object = None        # the value check's flags (value_flags.start_check); None: always open
    pending: object = None     # that check's ValueCheck until settle_speculative takes its verdict

ARRAYS = ("top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs",
          "host_cache", "device_buffer", "top_k_device_locs", "req_pool_indices", "seq_lens",
          "num_real_reqs")


@remember_host_checks()
def speculative_host_checks(*, top_k_tokens, device_buffer_tokens, host_cache_locs,
                            device_buffer_locs, host_cache, device_buffer, top_k_device_locs,
                            req_pool_indices, seq_lens, state, num_real_reqs, miss_src=None,
                            miss_dst=None, miss_count=None, item_size_bytes=None,
                            for_kernel=False) -> SpecCall:
    """The host part of :func:`check_speculative` (types, shapes, dtypes, layouts, scalars; no value
    inside an array), remembered for repeated calls on the same buffers."""
    args = dict(top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
                host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
                host_cache=host_cache, device_buffer=device_buffer, top_k_device_locs=top_k_device_locs,
                req_pool_indices=req_pool_indices, seq_lens=seq_lens, num_real_reqs=num_real_reqs,
                miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)
    for name in ARRAYS:
        require_array(name, args[name])
    for name in ("miss_src", "miss_dst", "miss_count"):
        if args[name] is not None:
            require_array(name, args[name])
    if top_k_tokens.ndim != 3:
        fail(f"speculative top_k_tokens must have shape [batch, steps, top_k], got shape "
             f"{tuple(getattr(top_k_tokens, 'shape', ()))}")
    batch, steps, top_k = (int(x) for x in top_k_tokens.shape)
    if not 2 <= steps <= 4:
        fail(steps_message(steps))
    t = steps * top_k
    if top_k <= 0 or t > MAX_OCCURRENCES:
        fail(f"speculative swap needs 0 < steps * top_k <= {MAX_OCCURRENCES}, got {steps} * {top_k} "
             f"(the last two axes of top_k_tokens)")
    check_ndim("top_k_device_locs", top_k_device_locs, 3, f"[batch, steps, top_k] = [{batch}, {steps}, {top_k}]")
    if tuple(top_k_device_locs.shape) != (batch, steps, top_k):
        fail(f"top_k_device_locs must have shape [batch, steps, top_k] = [{batch}, {steps}, {top_k}], "
             f"got shape {tuple(top_k_device_locs.shape)} (it must match top_k_tokens)")
    record = check_miss_plan(miss_src, miss_dst, miss_count, batch=batch, capacity=t,
                             shape_message=plan_shape_message(t), count_message=COUNT_MESSAGE)
    n, hot, _, cap = check_state(state, num_occurrences=t)
    if not state.scratch_state.flags.c_contiguous:
        fail("state.scratch_state must be C-contiguous (its metadata rows are read as int64 words)")
    check_dtype("top_k_tokens", top_k_tokens, np.int32)
    check_dtype("top_k_device_locs", top_k_device_locs, np.int32)
    for name, a in (("top_k_tokens", top_k_tokens), ("top_k_device_locs", top_k_device_locs)):
        if a.strides[2] != 4 or a.strides[1] != 4 * top_k:
            fail(f"{name} rows must be dense over (steps, top_k), got strides {tuple(a.strides)} bytes")
    for name, a in (("device_buffer_tokens", device_buffer_tokens), ("device_buffer_locs", device_buffer_locs)):
        check_ndim(name, a, 2, "[num_requests, H + tail]")
        check_dtype(name, a, np.int32)
        check_inner_contiguous(name, a)
        if a.shape[0] < n or a.shape[1] < hot:
            fail(f"{name} must have shape [>= {n}, >= hot_buffer_size {hot}], got {tuple(a.shape)}")
    if device_buffer_locs.shape != device_buffer_tokens.shape or \
            row_stride(device_buffer_locs) != row_stride(device_buffer_tokens):
        fail(f"device_buffer_locs must have the shape and row stride of device_buffer_tokens, got "
             f"{tuple(device_buffer_locs.shape)} / {row_stride(device_buffer_locs)} and "
             f"{tuple(device_buffer_tokens.shape)} / {row_stride(device_buffer_tokens)}")
    check_ndim("host_cache_locs", host_cache_locs, 2, "[num_requests, max_positions]")
    check_dtype("host_cache_locs", host_cache_locs, np.int64)
    if host_cache_locs.shape[0] < n or row_stride(host_cache_locs) != host_cache_locs.shape[1] or \
            host_cache_locs.shape[1] > 2 ** 31:
        fail(f"host_cache_locs must be row-contiguous [>= {n}, <= 2^31] int64, got shape "
             f"{tuple(host_cache_locs.shape)} strides {tuple(host_cache_locs.strides)}")
    check_ndim("req_pool_indices", req_pool_indices, 1, f"[batch] = [{batch}]")
    check_dtype("req_pool_indices", req_pool_indices, np.int64)
    if req_pool_indices.shape[0] != batch or not req_pool_indices.flags.c_contiguous:
        fail(f"req_pool_indices must have shape [batch] = [{batch}] int64 (contiguous), got {tuple(req_pool_indices.shape)}")
    check_ndim("seq_lens", seq_lens, 1, f"[batch * steps] = [{batch * steps}]")
    check_dtype("seq_lens", seq_lens, np.int32)
    if seq_lens.shape[0] != batch * steps or not seq_lens.flags.c_contiguous:
        fail(f"seq_lens must have shape [batch * steps] = [{batch * steps}] int32 (one length per "
             f"step, contiguous), got shape {tuple(seq_lens.shape)}")
    check_ndim("num_real_reqs", num_real_reqs, 1, "[>= 1]")
    check_dtype("num_real_reqs", num_real_reqs, np.int32)
    if num_real_reqs.shape[0] < 1:
        fail("num_real_reqs must have at least one element")
    for name, a in (("host_cache", host_cache), ("device_buffer", device_buffer)):
        if not a.flags.c_contiguous:
            fail(f"{name} must be C-contiguous, got strides {tuple(a.strides)} bytes")
    if for_kernel and device.backend() == "cuda":
        if not device.is_mapped(host_cache):
            fail("host_cache must be device-readable host memory (device.host_cache_array), "
                 f"got {type(host_cache).__name__}")
        if not isinstance(device_buffer, device.xp.ndarray):
            fail(f"device_buffer must be a device array, got {type(device_buffer).__name__}")
        for name in ("top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs",
                     "top_k_device_locs", "req_pool_indices", "seq_lens", "num_real_reqs"):
            if not isinstance(args[name], device.xp.ndarray):
                fail(f"{name} must be a device (CuPy) array, got {type(args[name]).__name__}")
    if item_size_bytes is None:
        item_size_bytes = int(host_cache.strides[0]) if host_cache.ndim else 0
    item_size_bytes = check_int("item_size_bytes", item_size_bytes, 1, 2 ** 31 - 1)
    check_item_copy(item_size_bytes, host_cache, device_buffer)
    call = SpecCall(batch, steps, top_k, hot, int(device_buffer_tokens.shape[1]) - hot, n, cap,
                    item_size_bytes, record, top_k_tokens, device_buffer_tokens, host_cache_locs,
                    device_buffer_locs, host_cache, device_buffer, top_k_device_locs,
                    req_pool_indices, seq_lens, state, num_real_reqs, miss_src, miss_dst,
                    miss_count)
    check_arguments_disjoint(args, state)
    return call


def check_speculative(*, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                      host_cache, device_buffer, top_k_device_locs, req_pool_indices, seq_lens,
                      state, num_real_reqs, miss_src=None, miss_dst=None, miss_count=None,
                      item_size_bytes=None, checks="full", for_kernel: bool = False,
                      defer: bool = False) -> SpecCall:
    """Every check of the launcher, before anything is launched or written (ValueError).

    Shapes, dtypes and scalars on the host; with ``checks="full"`` (default) then every value
    the kernel indexes with (``value_checks.py``): on the device in one pass when ``for_kernel``,
    else with the NumPy reference of that pass. ``checks="shapes"`` skips the value checks for
    callers who validated them upstream. ``for_kernel`` also adds the memory-kind checks of a GPU
    launch (mapped host pool, device buffers); the NumPy reference takes host arrays in both worlds.
    ``defer=True`` (the launcher): return once the device pass is enqueued, with the call's
    ``gate`` and ``pending`` check; :func:`settle_speculative` raises after the gated launch.
    """
    check_mode(checks)
    call = speculative_host_checks(
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens, host_cache_locs=host_cache_locs,
        device_buffer_locs=device_buffer_locs, host_cache=host_cache, device_buffer=device_buffer,
        top_k_device_locs=top_k_device_locs, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
        state=state, num_real_reqs=num_real_reqs, miss_src=miss_src, miss_dst=miss_dst,
        miss_count=miss_count, item_size_bytes=item_size_bytes,
        for_kernel=for_kernel)
    if checks == "full" and call.batch:   # device arrays are checked on the device, host arrays in NumPy
        if for_kernel or not isinstance(top_k_tokens, np.ndarray):
            return attach_check(call, start_value_checks(call), settle_speculative, defer)
        value_checks(call, on_device=False)
    return call


def settle_speculative(call: SpecCall) -> SpecCall:
    """Wait for ``call``'s device value check: raise its ValueError or return the settled call."""
    return settle(call, raise_value_flags)


READ_ONLY = ("top_k_tokens", "host_cache_locs", "host_cache", "req_pool_indices", "seq_lens",
             "num_real_reqs")
WRITTEN = ("device_buffer_tokens", "device_buffer_locs", "device_buffer", "top_k_device_locs",
           "miss_src", "miss_dst", "miss_count")


def check_arguments_disjoint(args: dict, state) -> None:
    """No array the call writes (``WRITTEN``, the state's arrays) shares memory with another
    argument (a kernel reading what another thread writes would race); ``READ_ONLY`` arrays may
    share memory with each other."""
    written = {name: args[name] for name in WRITTEN}
    written.update((f"state.{f}", a) for f, a in zip(state._fields, state))
    check_no_overlap(written, {name: args[name] for name in READ_ONLY})

