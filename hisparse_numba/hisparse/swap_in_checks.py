"""The preconditions of the single-step swap-in (``swap_in.py``), checked before anything is written.

sglang's own checks come first, with its texts; then the checks it leaves out although breaking
them corrupts memory or state silently (``docs/hisparse-single-step.md#what-sglang-leaves-unchecked``).
Validation reads the index tables back to the host once (a few small device-to-host copies, about
a millisecond at batch 64 on a GPU) and checks every real row with whole-batch NumPy passes; a
rejected call writes nothing. Lessons 05, 07, 08 and 09 each teach one of these checks.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import device
from ..checks import (
    check_block_size,
    check_dtype,
    check_dtype_in,
    check_inner_contiguous,
    check_item_buffer,
    check_item_copy,
    check_miss_plan,
    check_ndim,
    describe,
    fail,
    row_stride,
)

MAX_SLOTS = 32767  # slot ids and lanes are int16


class SwapInCall(NamedTuple):
    """One accepted single-step swap-in: the derived configuration and every array of the call.

    :func:`check_swap_in` builds it; ``swap_in.launch_unchecked`` launches it as it is. A lesson
    that shows what the kernel does with an input the check rejects builds one by hand (or
    ``_replace``s one field of an accepted call).
    """

    batch: int                 # rows of top_k_tokens: the grid
    num_real: int              # rows >= num_real are CUDA-graph padding
    num_top_k: int             # K
    hot_buffer_size: int       # H
    block_size: int
    record_plan: bool          # miss_src/miss_dst/miss_count given
    skip_io: bool              # plan and update tables, move no bytes
    item_size_bytes: int
    top_k_tokens: object
    device_buffer_tokens: object
    host_cache_locs: object
    device_buffer_locs: object
    host_cache: object
    device_buffer: object
    top_k_device_locs: object
    req_pool_indices: object
    seq_lens: object
    lru_slots: object
    num_real_reqs: object      # [1] int32 device array
    miss_src: object = None
    miss_dst: object = None
    miss_count: object = None


def check_swap_in(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
                  device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots,
                  item_size_bytes, num_top_k, hot_buffer_size, page_size=1, block_size=256,
                  num_real_reqs=None, miss_src=None, miss_dst=None, miss_count=None,
                  skip_io=False) -> SwapInCall:
    """Every precondition of the single-step swap-in, checked before anything is written.

    Takes the launcher's arguments, in its order (``page_size`` is unused, as in sglang), so that
    ``check_swap_in(**problem)`` works on a problem of ``hisparse.examples``.

    sglang's own checks come first, with its texts; then the checks sglang omits although a
    violation corrupts memory or state silently
    (``docs/hisparse-single-step.md#what-sglang-leaves-unchecked``).
    Returns the accepted call for :func:`swap_in.launch_unchecked`.
    """
    K, H = int(num_top_k), int(hot_buffer_size)
    if H < K:
        fail(f"hot_buffer_size ({hot_buffer_size}) must be >= num_top_k ({num_top_k})")
    batch = int(top_k_tokens.shape[0]) if top_k_tokens.ndim >= 1 else 0
    record = check_miss_plan(
        miss_src, miss_dst, miss_count, batch=batch, capacity=K,
        shape_message=f"miss_src/miss_dst must have shape [batch, >= top_k] (capacity {K}).",
        count_message="miss_count must have shape [batch].")
    if K < 1 or H > MAX_SLOTS:
        fail(f"num_top_k must be >= 1 and hot_buffer_size <= {MAX_SLOTS} (slot ids are int16), "
             f"got num_top_k={K}, hot_buffer_size={H}")
    check_block_size(block_size)

    for name, a, dtype in (("top_k_tokens", top_k_tokens, np.int32),
                           ("top_k_device_locs", top_k_device_locs, np.int32),
                           ("device_buffer_tokens", device_buffer_tokens, np.int32),
                           ("device_buffer_locs", device_buffer_locs, np.int32),
                           ("host_cache_locs", host_cache_locs, np.int64),
                           ("lru_slots", lru_slots, np.int16)):
        check_dtype(name, a, dtype)
    check_dtype_in("req_pool_indices", req_pool_indices, (np.int32, np.int64))
    check_dtype_in("seq_lens", seq_lens, (np.int32, np.int64))

    check_ndim("top_k_tokens", top_k_tokens, 2, "[batch, num_top_k]")
    if top_k_tokens.shape[1] != K:
        fail(f"num_top_k ({K}) must match top_k_tokens.shape[1] ({top_k_tokens.shape[1]}); "
             f"pass top_k_tokens[:, :{K}] to use the first {K} columns")
    check_ndim("top_k_device_locs", top_k_device_locs, 2, "[batch, >= num_top_k]")
    if top_k_device_locs.shape[0] != batch or top_k_device_locs.shape[1] < K:
        fail(f"top_k_device_locs must have shape [batch={batch}, >= num_top_k={K}], "
             f"got {describe(top_k_device_locs)}")
    for name, a in (("req_pool_indices", req_pool_indices), ("seq_lens", seq_lens)):
        if a.ndim != 1 or a.shape[0] != batch:
            fail(f"{name} must have shape [batch={batch}], got {describe(a)}")
    check_ndim("device_buffer_tokens", device_buffer_tokens, 2, "[requests, >= hot_buffer_size + 1]")
    check_ndim("device_buffer_locs", device_buffer_locs, 2, "[requests, >= hot_buffer_size + 1]")
    check_ndim("lru_slots", lru_slots, 2, "[requests, >= hot_buffer_size]")
    check_ndim("host_cache_locs", host_cache_locs, 2, "[requests, max_sequence]")
    requests = int(device_buffer_tokens.shape[0])
    if device_buffer_tokens.shape[1] < H:
        fail(f"device_buffer_tokens must have shape [requests, >= hot_buffer_size + 1] "
             f"(hot_buffer_size {H}), got {describe(device_buffer_tokens)}")
    if device_buffer_locs.shape[0] != requests or device_buffer_locs.shape[1] < H + 1:
        fail(f"device_buffer_locs must have shape [requests={requests}, >= hot_buffer_size + 1 = {H + 1}] "
             f"(column {H} holds the newest token's row), got {describe(device_buffer_locs)}")
    if requests > 1 and row_stride(device_buffer_locs) != row_stride(device_buffer_tokens):
        fail(f"device_buffer_locs row stride ({row_stride(device_buffer_locs)} elements) must equal "
             f"device_buffer_tokens row stride ({row_stride(device_buffer_tokens)} elements): "
             "sglang indexes both tables with the tags' stride, so a different shape reads wrong rows")
    if lru_slots.shape[0] != requests or lru_slots.shape[1] < H:
        fail(f"lru_slots must have shape [requests={requests}, >= hot_buffer_size={H}], got {describe(lru_slots)}")
    if host_cache_locs.shape[0] != requests:
        fail(f"host_cache_locs must have shape [requests={requests}, max_sequence], got {describe(host_cache_locs)}")
    if not host_cache_locs.flags.c_contiguous:
        fail(f"host_cache_locs must be C-contiguous: sglang uses shape[1] as its row stride, "
             f"got {describe(host_cache_locs)} with strides {tuple(host_cache_locs.strides)} bytes")
    for name, a in (("top_k_tokens", top_k_tokens), ("top_k_device_locs", top_k_device_locs),
                    ("device_buffer_tokens", device_buffer_tokens),
                    ("device_buffer_locs", device_buffer_locs), ("lru_slots", lru_slots)):
        check_inner_contiguous(name, a)
    check_item_copy(item_size_bytes, host_cache, device_buffer)
    check_item_buffer("host_cache", host_cache, item_size_bytes, -1)
    check_item_buffer("device_buffer", device_buffer, item_size_bytes, -1)
    num_real, num_real_array = _check_num_real(num_real_reqs, batch)

    _check_rows(top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
                host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
                host_cache=host_cache, device_buffer=device_buffer,
                req_pool_indices=req_pool_indices, seq_lens=seq_lens, lru_slots=lru_slots,
                item_size_bytes=int(item_size_bytes), K=K, H=H, num_real=num_real)
    return SwapInCall(
        batch=batch, num_real=num_real, num_top_k=K, hot_buffer_size=H, block_size=int(block_size),
        record_plan=record, skip_io=bool(skip_io), item_size_bytes=int(item_size_bytes),
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
        host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs, host_cache=host_cache,
        device_buffer=device_buffer, top_k_device_locs=top_k_device_locs,
        req_pool_indices=req_pool_indices, seq_lens=seq_lens, lru_slots=lru_slots,
        num_real_reqs=num_real_array, miss_src=miss_src if record else None,
        miss_dst=miss_dst if record else None, miss_count=miss_count if record else None)


def _check_rows(*, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                host_cache, device_buffer, req_pool_indices, seq_lens, lru_slots,
                item_size_bytes, K, H, num_real) -> None:
    """The data preconditions of every real row, checked with whole-batch NumPy passes.

    Each table is copied to the host once (only the rows involved). The accepting path has no
    Python loop over batch rows; when a check fails, :func:`_raise_long_row_error` walks the
    rows in order to report the first offending one.
    """
    if num_real == 0:
        return
    requests = int(device_buffer_tokens.shape[0])
    max_seq = int(host_cache_locs.shape[1])
    rids = device.to_host(req_pool_indices[:num_real]).astype(np.int64)
    lens = device.to_host(seq_lens[:num_real]).astype(np.int64)
    tokens = device.to_host(top_k_tokens[:num_real])
    bad = np.flatnonzero((rids < 0) | (rids >= requests))
    if bad.size:
        b = int(bad[0])
        fail(f"req_pool_indices[{b}] = {rids[b]} is outside [0, {requests}) (rows of device_buffer_tokens)")

    count = np.clip(np.minimum(lens, K), 0, None)                 # lanes a fast-path row reads
    past = ((lens <= H)[:, None] & (np.arange(K) < count[:, None])) & (tokens >= lens[:, None])
    bad = np.flatnonzero(past.any(axis=1))
    if bad.size:
        b = int(bad[0])
        fail(f"top_k_tokens row {b} (fast path, seq_len {lens[b]}) selects positions "
             f"{tokens[b][past[b]][:8].tolist()} "
             f">= seq_len; the fast path reads device_buffer_locs[rid, position] unchecked")

    long_rows = np.flatnonzero(lens > H)
    if long_rows.size == 0:
        return
    lr = rids[long_rows]
    if np.unique(lr).size != lr.size:
        owners = {}
        for b in long_rows:
            rid = int(rids[b])
            if rid in owners:
                fail(f"req_pool_indices maps batch rows {owners[rid]} and {b} to request row {rid}; "
                     "a long-path row updates its request's tags and LRU, so it must own that row")
            owners[rid] = int(b)
    tags = device.to_host(device_buffer_tokens[_module_of(device_buffer_tokens).asarray(lr), :H])
    lru_slots_rows = device.to_host(lru_slots[_module_of(lru_slots).asarray(lr), :H])
    locs = device.to_host(device_buffer_locs[_module_of(device_buffer_locs).asarray(lr), :H])

    n = long_rows.size
    t = tokens[long_rows]                                         # [n, K]
    newest = lens[long_rows] - 1
    lru = lru_slots_rows
    if ((t < 0) | (t > newest[:, None])).any() or ((lru < 0) | (lru >= H)).any():
        _raise_long_row_error(long_rows, lens, rids, tokens, tags, lru, H, host_cache_locs)
    row = np.arange(n, dtype=np.int64)[:, None]
    lru = lru + row * H                                           # into the raveled [n, H] tables
    seen = np.zeros(n * H, bool)
    seen[lru] = True
    # One [n, width + 1] table (raveled) indexed by (row, position), used as a sparse set:
    # never cleared, an entry counts only if it points back at an element at that (row,
    # position). A scatter keeps one writer per index, so a read-back mismatch is a duplicate.
    # Column ``width`` takes the tags that no lane can select (free slots, tags >= width).
    width = int(newest.max()) + 1
    table = np.empty(n * (width + 1), np.int32)
    lane_at = t + row * (width + 1)
    lane_ids = np.arange(n * K, dtype=np.int32).reshape(n, K)
    table[lane_at] = lane_ids
    bad = not seen.all() or (table[lane_at] != lane_ids).any()
    tag_col = np.minimum(tags.view(np.uint32), width)            # a negative tag is huge as uint32
    tag_at = tag_col + row * (width + 1)
    match = np.take(lane_at, table[tag_at], mode="clip") == tag_at    # the slot holds a selected position
    # Resident tags are distinct: the same read-back on slot ids (tags >= width by sorting).
    slot_ids = np.arange(n * H, dtype=np.int32).reshape(n, H)
    table[tag_at] = slot_ids
    bad = bad or ((table[tag_at] != slot_ids) & (tag_col < width)).any()
    far_tags = ((row << 32) + tags)[tags >= width]
    if bad or np.unique(far_tags).size != far_tags.size:
        _raise_long_row_error(long_rows, lens, rids, tokens, tags, lru_slots_rows, H, host_cache_locs)

    resident = np.take(tag_at, table[lane_at], mode="clip") == lane_at
    missed_lane = ~resident & (t != newest[:, None])              # the newest is served from column H
    missed = t[missed_lane]                                       # the misses, in lane order
    if (missed >= max_seq).any():
        _raise_long_row_error(long_rows, lens, rids, tokens, tags, lru_slots_rows, H, host_cache_locs)
    num_missed = missed_lane.sum(axis=1)
    hit = match & (tags != newest[:, None])                       # a slot holding the newest is evictable
    evictable = ~hit.ravel()[lru]                                 # LRU order
    filled = evictable & (np.cumsum(evictable, axis=1, dtype=np.int32) <= num_missed[:, None])
    dst = locs.ravel()[lru[filled]]                               # miss order (m-th evictable slot)
    miss_row = np.repeat(np.arange(n), num_missed)                # index into long_rows
    if missed.size == 0:
        return
    src = _gather_flat(host_cache_locs, lr[miss_row] * max_seq + missed)
    if (src < 0).any():
        i = int(np.flatnonzero(src < 0)[0])
        missing = missed[(miss_row == miss_row[i]) & (src < 0)]
        fail(f"top_k_tokens row {long_rows[miss_row[i]]} misses positions {missing[:8].tolist()} that have no host backup "
             "(host_cache_locs = -1); a position can be loaded only after its device-to-host backup")
    if (dst < 0).any():
        fail(f"device_buffer_locs holds negative rows {np.unique(dst[dst < 0])[:8].tolist()} in slots "
             "that receive a miss")
    check_item_buffer("host_cache", host_cache, item_size_bytes, int(src.max()))
    check_item_buffer("device_buffer", device_buffer, item_size_bytes, int(dst.max()))


def _raise_long_row_error(long_rows, lens, rids, tokens, tags, lru, H, host_cache_locs):
    """Report the first long-path row that breaks a precondition (error path only)."""
    lru = lru.astype(np.int64)
    max_seq = int(host_cache_locs.shape[1])
    for n, b in enumerate(long_rows):
        seq_len, t, rid = int(lens[b]), tokens[b].astype(np.int64), int(rids[b])
        newest = seq_len - 1
        bad = t[(t < 0) | (t >= seq_len)]
        if bad.size:
            fail(f"top_k_tokens row {b} (long path, seq_len {seq_len} > hot_buffer_size {H}) holds positions "
                 f"{bad[:8].tolist()} outside [0, seq_len): every lane of a long-path row must be a valid position")
        values, counts = np.unique(t, return_counts=True)
        if (counts > 1).any():
            fail(f"top_k_tokens row {b} (long path) holds duplicate positions {values[counts > 1][:8].tolist()}: "
                 "the positions of a long-path row must be distinct")
        if not np.array_equal(np.sort(lru[n]), np.arange(H)):
            fail(f"lru_slots row {rid} is not a permutation of 0..{H - 1} (initialise it to arange(hot_buffer_size))")
        row_tags = tags[n]
        resident = row_tags[row_tags >= 0]
        values, counts = np.unique(resident, return_counts=True)
        if (counts > 1).any():
            fail(f"device_buffer_tokens row {rid} holds positions {values[counts > 1][:8].tolist()} in more "
                 "than one slot; a position may be resident in one slot only")
        want = t[t != newest]
        missed = want[~np.isin(want, resident)]
        far = missed[missed >= max_seq]
        if far.size:
            fail(f"top_k_tokens row {b} misses positions {far[:8].tolist()} beyond host_cache_locs "
                 f"({describe(host_cache_locs)})")
    raise AssertionError("a long-path check failed but no row reports it")


def _check_num_real(num_real_reqs, batch):
    """The value of ``num_real_reqs`` in ``[0, batch]`` and the ``[1]`` int32 device array the kernel
    reads (built from ``batch`` when the caller passes None)."""
    if num_real_reqs is None:
        return batch, device.to_device(np.array([batch], dtype=np.int32))
    if isinstance(num_real_reqs, (int, np.integer)):
        fail(f"num_real_reqs must be a [1] int32 device array, got the Python value {num_real_reqs}")
    if num_real_reqs.ndim != 1 or num_real_reqs.shape[0] != 1 or np.dtype(num_real_reqs.dtype) != np.int32:
        fail(f"num_real_reqs must be an int32 array with shape [1], got {describe(num_real_reqs)}")
    value = int(device.to_host(num_real_reqs)[0])
    if value < 0 or value > batch:
        fail(f"num_real_reqs[0] = {value} must be in [0, batch={batch}]")
    return value, num_real_reqs


def _module_of(a):
    return np if isinstance(a, np.ndarray) else device.xp


def _gather_flat(a, flat):
    """``a.ravel()[flat]`` of a C-contiguous ``a`` as a NumPy array, one transfer on a GPU."""
    return device.to_host(a.reshape(-1)[_module_of(a).asarray(flat)])
