"""The preconditions of the single-step swap-in (``swap_in.py``), checked before anything is written.

sglang's own checks come first, with its texts; then the checks it leaves out although breaking
them corrupts memory or state silently (``docs/single-step-swap-in.md#what-sglang-leaves-unchecked``).
Python types, shapes, dtypes and layouts are checked on the host. The values the kernel indexes
with are checked on the device in one pass (``value_checks``: one launch, one block per
batch row, one 136-byte read-back that the launcher awaits after enqueuing its gated kernel), so
validation costs no host copy of the tables and no memory that grows with ``seq_lens``. Only a
rejected call reads the offending row back, to say what is wrong with it (here).
``checks="shapes"`` skips the device pass.

The value conditions are listed in ``value_checks``.

Lessons 05, 07, 08 and 09 each teach one of the shape checks.
"""

from __future__ import annotations

import functools
import numpy as np

from ... import device
from ...checks import (agreed_rows, attach_check, check_block_size, check_dtype,
                      check_dtype_in, check_flag, check_inner_contiguous, check_int,
                      check_item_buffer, check_item_copy, check_miss_plan, check_mode, check_ndim,
                      check_no_overlap, describe, fail, remember_host_checks,
                      require_array, row_stride, settle)
from .call import SwapInCall
from .value_checks import (HOT_LOCATION, MISS_SOURCE, NUM_REAL, NUM_REAL_VALUE, REQUEST,
                                   SELECTION, SLOT_STATE, start_swap_in_check)

MAX_SLOTS = 32767  # slot ids and lanes are int16


# ---------------------------------------------------------------------------------------------
# From a verdict to the ValueError (a rejected call only: reads the offending row back).

def raise_swap_in_flags(flags, call: SwapInCall) -> None:
    """The ``ValueError`` of the first failed condition, in the order of the conditions."""
    K, H, item = call.num_top_k, call.hot_buffer_size, call.item_size_bytes
    if flags[NUM_REAL][0]:
        fail(f"num_real_reqs[0] = {flags[NUM_REAL_VALUE][1]} must be in [0, batch={call.batch}]")
    failed = [c for c in (REQUEST, SELECTION, SLOT_STATE, MISS_SOURCE, HOT_LOCATION) if flags[c][0]]
    if not failed:
        return
    condition, b = failed[0], flags[failed[0]][1]

    def row(a, r, width=None):
        return device.to_host(a[r] if width is None else a[r, :width]).astype(np.int64)

    num_real = flags[NUM_REAL_VALUE][1]
    rids = device.to_host(call.req_pool_indices[:max(num_real, 0)]).astype(np.int64)
    if condition == HOT_LOCATION:
        _raise_hot_location(call, rids)
    rid, seq_len = int(rids[b]), int(device.to_host(call.seq_lens[b:b + 1])[0])
    requests = int(call.device_buffer_tokens.shape[0])
    if condition == REQUEST:
        if not 0 <= rid < requests:
            fail(f"req_pool_indices[{b}] = {rid} is outside [0, {requests}) (rows of device_buffer_tokens)")
        a = int(np.flatnonzero(rids[:b] == rid)[0])
        fail(f"req_pool_indices maps batch rows {a} and {b} to request row {rid}; each real batch row "
             "must own its request row (a long-path row updates its tags and LRU)")
    t = row(call.top_k_tokens, b)
    if condition == SELECTION:
        if seq_len < 0:
            fail(f"seq_lens[{b}] = {seq_len} is negative; a sequence length is >= 0")
        if seq_len <= H:
            lanes = t[:min(seq_len, K)]
            fail(f"top_k_tokens row {b} (fast path, seq_lens[{b}] = {seq_len}) selects positions "
                 f"{lanes[lanes >= seq_len][:8].tolist()} >= seq_len; the fast path reads "
                 "device_buffer_locs[rid, position] unchecked")
        bad = t[(t < 0) | (t >= seq_len)]
        if bad.size:
            fail(f"top_k_tokens row {b} (long path, seq_lens[{b}] = {seq_len} > hot_buffer_size {H}) holds positions "
                 f"{bad[:8].tolist()} outside [0, seq_len): every lane of a long-path row must be a valid position")
        values, counts = np.unique(t, return_counts=True)
        fail(f"top_k_tokens row {b} (long path) holds duplicate positions {values[counts > 1][:8].tolist()}: "
             "the positions of a long-path row must be distinct")
    newest = seq_len - 1
    tags = row(call.device_buffer_tokens, rid, H)
    if condition == SLOT_STATE:
        if not np.array_equal(np.sort(row(call.lru_slots, rid, H)), np.arange(H)):
            fail(f"lru_slots row {rid} is not a permutation of 0..{H - 1} (initialise it to arange(hot_buffer_size))")
        selected = tags[(tags >= 0) & (tags != newest) & np.isin(tags, t)]
        values, counts = np.unique(selected, return_counts=True)
        fail(f"device_buffer_tokens row {rid} holds positions {values[counts > 1][:8].tolist()} in more "
             "than one slot; a position may be resident in one slot only")
    missed = t[(t != newest) & ~np.isin(t, tags)]
    max_seq = int(call.host_cache_locs.shape[1])
    far = missed[missed >= max_seq]
    if far.size:
        fail(f"top_k_tokens row {b} (seq_lens[{b}] = {seq_len}) misses positions {far[:8].tolist()} "
             f"beyond host_cache_locs ({describe(call.host_cache_locs)})")
    src = device.to_host(call.host_cache_locs[rid]).astype(np.int64)[missed]
    if (src < 0).any():
        fail(f"top_k_tokens row {b} (seq_lens[{b}] = {seq_len}) misses positions {missed[src < 0][:8].tolist()} "
             "that have no host backup (host_cache_locs = -1); a position can be loaded only after its "
             "device-to-host backup")
    worst = int(np.argmax(src))
    fail(f"host_cache holds {call.host_cache.nbytes} bytes, but host_cache_locs[{rid}, {int(missed[worst])}] "
         f"= {int(src[worst])} needs item {int(src[worst])} of item_size_bytes = {item} (a miss of top_k_tokens row {b})")


def _raise_hot_location(call: SwapInCall, rids) -> None:
    """The first hot slot (real rows in order) whose device row is outside the pool or taken."""
    H, item = call.hot_buffer_size, call.item_size_bytes
    device_items = call.device_buffer.nbytes // item
    owner = {}
    for rid in rids.tolist():
        if not 0 <= rid < call.device_buffer_tokens.shape[0]:
            continue
        for p, loc in enumerate(device.to_host(call.device_buffer_locs[rid, :H]).tolist()):
            if loc < 0:
                fail(f"device_buffer_locs[{rid}, {p}] = {loc} is negative; every hot slot needs a device "
                     "row >= 0 (a miss is copied into it)")
            if loc >= device_items:
                fail(f"device_buffer holds {call.device_buffer.nbytes} bytes, but device_buffer_locs[{rid}, {p}] "
                     f"= {loc} needs item {loc} of item_size_bytes = {item}")
            if loc in owner:
                fail(f"device_buffer_locs[{owner[loc][0]}, {owner[loc][1]}] and device_buffer_locs[{rid}, {p}] "
                     f"are both device row {loc}; every hot slot needs a device row of its own "
                     "(two misses into one row race)")
            owner[loc] = (rid, p)
    raise AssertionError("the hot-location check failed but no slot reports it")


@functools.cache
def _all_rows_real(batch: int):
    """The ``[1]`` int32 device array ``[batch]`` used when the caller passes no num_real_reqs
    (one per batch size; kernels only read it)."""
    return device.to_device(np.array([batch], dtype=np.int32))


def _check_num_real_array(num_real_reqs) -> None:
    if isinstance(num_real_reqs, (int, np.integer)):
        fail(f"num_real_reqs must be a [1] int32 device array, got the Python value {num_real_reqs}")
    require_array("num_real_reqs", num_real_reqs)
    if num_real_reqs.ndim != 1 or num_real_reqs.shape[0] != 1 or np.dtype(num_real_reqs.dtype) != np.int32:
        fail(f"num_real_reqs must be an int32 array with shape [1], got {describe(num_real_reqs)}")


@remember_host_checks()
def swap_in_host_checks(*, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots, item_size_bytes,
        num_top_k, hot_buffer_size, page_size, block_size, num_real_reqs, miss_src, miss_dst,
        miss_count, skip_io) -> SwapInCall:
    """The host part of :func:`check_swap_in`: types, shapes, dtypes, layouts and scalars (no
    value inside an array); remembered for repeated calls on the same buffers."""
    arrays = dict(top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
                  host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
                  host_cache=host_cache, device_buffer=device_buffer,
                  top_k_device_locs=top_k_device_locs, req_pool_indices=req_pool_indices,
                  seq_lens=seq_lens, lru_slots=lru_slots)
    for name, a in arrays.items():
        require_array(name, a)
    plan = dict(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)
    for name, a in plan.items():
        if a is not None:
            require_array(name, a)
    if num_real_reqs is not None:
        _check_num_real_array(num_real_reqs)
    K, H = check_int("num_top_k", num_top_k), check_int("hot_buffer_size", hot_buffer_size)
    item = check_int("item_size_bytes", item_size_bytes)
    block = check_int("block_size", block_size)
    if check_int("page_size", page_size) < 1:
        fail(f"page_size must be >= 1, got {page_size}")
    skip = check_flag("skip_io", skip_io)

    if H < K:
        fail(f"hot_buffer_size ({hot_buffer_size}) must be >= num_top_k ({num_top_k})")
    check_ndim("top_k_tokens", top_k_tokens, 2, "[batch, num_top_k]")
    check_ndim("top_k_device_locs", top_k_device_locs, 2, "[batch, >= num_top_k]")
    check_ndim("req_pool_indices", req_pool_indices, 1, "[batch]")
    check_ndim("seq_lens", seq_lens, 1, "[batch]")
    batch = agreed_rows("batch", {"top_k_tokens": top_k_tokens, "top_k_device_locs": top_k_device_locs,
                                  "req_pool_indices": req_pool_indices, "seq_lens": seq_lens})
    record = check_miss_plan(
        miss_src, miss_dst, miss_count, batch=batch, capacity=K,
        shape_message=f"miss_src/miss_dst must have shape [batch, >= top_k] (capacity {K}).",
        count_message="miss_count must have shape [batch].")
    if K < 1 or H > MAX_SLOTS:
        fail(f"num_top_k must be >= 1 and hot_buffer_size <= {MAX_SLOTS} (slot ids are int16), "
             f"got num_top_k={K}, hot_buffer_size={H}")
    check_block_size(block)

    for name, a, dtype in (("top_k_tokens", top_k_tokens, np.int32),
                           ("top_k_device_locs", top_k_device_locs, np.int32),
                           ("device_buffer_tokens", device_buffer_tokens, np.int32),
                           ("device_buffer_locs", device_buffer_locs, np.int32),
                           ("host_cache_locs", host_cache_locs, np.int64),
                           ("lru_slots", lru_slots, np.int16)):
        check_dtype(name, a, dtype)
    check_dtype_in("req_pool_indices", req_pool_indices, (np.int32, np.int64))
    check_dtype_in("seq_lens", seq_lens, (np.int32, np.int64))

    if top_k_tokens.shape[1] != K:
        fail(f"num_top_k ({K}) must match top_k_tokens.shape[1] ({top_k_tokens.shape[1]}); "
             f"pass top_k_tokens[:, :{K}] to use the first {K} columns")
    if top_k_device_locs.shape[1] < K:
        fail(f"top_k_device_locs must have shape [batch={batch}, >= num_top_k={K}], "
             f"got {describe(top_k_device_locs)}")
    check_ndim("device_buffer_tokens", device_buffer_tokens, 2, "[requests, >= hot_buffer_size + 1]")
    check_ndim("device_buffer_locs", device_buffer_locs, 2, "[requests, >= hot_buffer_size + 1]")
    check_ndim("lru_slots", lru_slots, 2, "[requests, >= hot_buffer_size]")
    check_ndim("host_cache_locs", host_cache_locs, 2, "[requests, max_sequence]")
    requests = agreed_rows("request rows", {
        "device_buffer_tokens": device_buffer_tokens, "device_buffer_locs": device_buffer_locs,
        "lru_slots": lru_slots, "host_cache_locs": host_cache_locs})
    if device_buffer_tokens.shape[1] < H:
        fail(f"device_buffer_tokens must have shape [requests, >= hot_buffer_size + 1] "
             f"(hot_buffer_size {H}), got {describe(device_buffer_tokens)}")
    if device_buffer_locs.shape[1] < H + 1:
        fail(f"device_buffer_locs must have shape [requests={requests}, >= hot_buffer_size + 1 = {H + 1}] "
             f"(column {H} holds the newest token's row), got {describe(device_buffer_locs)}")
    if requests > 1 and row_stride(device_buffer_locs) != row_stride(device_buffer_tokens):
        fail(f"device_buffer_locs row stride ({row_stride(device_buffer_locs)} elements) must equal "
             f"device_buffer_tokens row stride ({row_stride(device_buffer_tokens)} elements): "
             "sglang indexes both tables with the tags' stride, so a different shape reads wrong rows")
    if lru_slots.shape[1] < H:
        fail(f"lru_slots must have shape [requests={requests}, >= hot_buffer_size={H}], got {describe(lru_slots)}")
    if not host_cache_locs.flags.c_contiguous:
        fail(f"host_cache_locs must be C-contiguous: sglang uses shape[1] as its row stride, "
             f"got {describe(host_cache_locs)} with strides {tuple(host_cache_locs.strides)} bytes")
    for name, a in (("top_k_tokens", top_k_tokens), ("top_k_device_locs", top_k_device_locs),
                    ("device_buffer_tokens", device_buffer_tokens),
                    ("device_buffer_locs", device_buffer_locs), ("lru_slots", lru_slots)):
        check_inner_contiguous(name, a)
    check_item_copy(item, host_cache, device_buffer)
    check_item_buffer("host_cache", host_cache, item, -1)
    check_item_buffer("device_buffer", device_buffer, item, -1)
    written = {"top_k_device_locs": top_k_device_locs, "device_buffer_tokens": device_buffer_tokens,
               "lru_slots": lru_slots, **plan}
    if not skip:
        written["device_buffer"] = device_buffer
    check_no_overlap(written, {**arrays, "num_real_reqs": num_real_reqs})

    num_real = batch if num_real_reqs is None else None
    call = SwapInCall(
        batch=batch, num_real=num_real, num_top_k=K, hot_buffer_size=H, block_size=block,
        record_plan=record, skip_io=skip, item_size_bytes=item,
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
        host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs, host_cache=host_cache,
        device_buffer=device_buffer, top_k_device_locs=top_k_device_locs,
        req_pool_indices=req_pool_indices, seq_lens=seq_lens, lru_slots=lru_slots,
        num_real_reqs=_all_rows_real(batch) if num_real_reqs is None else num_real_reqs,
        miss_src=miss_src if record else None,
        miss_dst=miss_dst if record else None, miss_count=miss_count if record else None)
    return call


def check_swap_in(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
                  device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots,
                  item_size_bytes, num_top_k, hot_buffer_size, page_size=1, block_size=256,
                  num_real_reqs=None, miss_src=None, miss_dst=None, miss_count=None,
                  skip_io=False, checks="full", defer=False) -> SwapInCall:
    """Every precondition of the single-step swap-in, checked before anything is written.

    Takes the launcher's arguments, in its order (``page_size`` is unused, as in sglang), so that
    ``check_swap_in(**problem)`` works on a problem of ``single_step.examples``.

    sglang's own checks come first, with its texts; then the checks sglang omits although a
    violation corrupts memory or state silently
    (``docs/single-step-swap-in.md#what-sglang-leaves-unchecked``). With ``checks="full"`` (the
    default) the values are checked on the device (see the module docstring); ``"shapes"`` skips
    that pass. Returns the accepted call for :func:`swap_in.launch_unchecked`.

    ``defer=True`` (the public launcher) returns as soon as the device pass is enqueued: the call
    then carries its ``gate`` and ``pending`` check, the launcher enqueues the gated kernel and
    :func:`settle_swap_in` takes the verdict (and raises) afterwards, so the stream never waits.
    """
    full = check_mode(checks)
    call = swap_in_host_checks(
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
        host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
        host_cache=host_cache, device_buffer=device_buffer, top_k_device_locs=top_k_device_locs,
        req_pool_indices=req_pool_indices, seq_lens=seq_lens, lru_slots=lru_slots,
        item_size_bytes=item_size_bytes, num_top_k=num_top_k, hot_buffer_size=hot_buffer_size,
        page_size=page_size, block_size=block_size, num_real_reqs=num_real_reqs,
        miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count, skip_io=skip_io)
    if full and call.batch:
        call = attach_check(call, start_swap_in_check(call), settle_swap_in, defer)
    return call


def settle_swap_in(call: SwapInCall) -> SwapInCall:
    """Wait for ``call``'s device value check: raise its ``ValueError``, or return the call with
    ``num_real`` read back. A call without a pending check is returned as it is."""
    return settle(call, raise_swap_in_flags, NUM_REAL_VALUE)
