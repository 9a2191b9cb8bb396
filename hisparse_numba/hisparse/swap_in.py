"""HiSparse single-step swap-in: resolve top-k positions to hot-buffer rows, LRU eviction.

For each batch row ``b`` (request row ``rid = req_pool_indices[b]``, ``seq_len = seq_lens[b]``,
``K = num_top_k`` selected positions, a hot buffer of ``H = hot_buffer_size`` slots):

* padded row (``b >= num_real_reqs[0]``): every output lane is ``-1``; nothing else changes;
* fast path (``seq_len <= H``): position ``p`` lives in slot ``p``, so lane ``i`` gets
  ``device_buffer_locs[rid, t]`` for ``i < min(seq_len, K)`` and ``t >= 0``, else ``-1``;
  ``miss_count[b] = 0``;
* long path: the newest position ``seq_len - 1`` is served from column ``H``; a position
  resident in a hot slot is a hit; every other lane is a miss, and the m-th miss (in lane
  order) takes the m-th least-recently-used slot that holds no selected position, gets its
  tag, and its item is copied host -> device. ``lru_slots`` becomes
  ``unused evictable + filled (miss order) + hits``, each in previous LRU order.
  With a miss plan, ``miss_src[b, m]``/``miss_dst[b, m]`` record the m-th copy and
  ``miss_count[b]`` the number of misses.

Launch geometry: one CUDA block per batch row (grid ``B``, block ``block_size`` threads), so a
request's whole LRU reorder happens inside one block (``lru_slots`` are int16, and Numba has
no 16-bit atomics). Shared memory per block: a ``2K``-entry int64 open-addressing hash of the
selected positions (later reused for the miss copy list), ``K`` int16 evicted slots, ``K``
uint8 lane flags and ``block_size`` int32 scan cells: ``20K + 4 * block_size`` bytes (45 KiB
at K=2048, block 1024), independent of ``H``. Ranks are block-wide prefix scans
(``blockscan.py``: warp shuffles on a GPU, shared memory alone in the simulator). The item copy is
cooperative: the whole block walks the flattened (miss, 8-byte word) space, reading the host
pool zero-copy over PCIe.

Validation reads the index tables back to the host (a few small device-to-host copies, about
a millisecond at batch 64 on a GPU) to prove the preconditions that the kernel relies on and
that sglang leaves unchecked; a rejected call writes nothing.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .. import device
from ..checks import (
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
from ..device import cuda
from ..blockscan import block_exclusive_scan
from ..itemcopy import copy_items_flat
from .miss_plan import placeholder_plan

MAX_SLOTS = 32767  # slot ids and lanes are int16


class SwapInCall(NamedTuple):
    batch: int
    num_real: int
    record_plan: bool
    num_real_array: object  # the [1] int32 array the kernel reads (built when None)


def _module_of(a):
    return np if isinstance(a, np.ndarray) else device.xp


def _gather_flat(a, flat):
    """``a.ravel()[flat]`` of a C-contiguous ``a`` as a NumPy array, one transfer on a GPU."""
    return device.to_host(a.reshape(-1)[_module_of(a).asarray(flat)])


def _check_block_size(block_size) -> None:
    if int(block_size) < 32 or int(block_size) > 1024 or int(block_size) % 32:
        fail(f"block_size must be a multiple of 32 in [32, 1024], got {block_size}")


def _check_num_real(num_real_reqs, batch):
    """The ``[1]`` int32 array of real rows (built when None) and its value in ``[0, batch]``."""
    if num_real_reqs is None:
        arr = np.array([batch], dtype=np.int32)
        return batch, arr
    if isinstance(num_real_reqs, (int, np.integer)):
        fail(f"num_real_reqs must be a [1] int32 device array, got the Python value {num_real_reqs}")
    if num_real_reqs.ndim != 1 or num_real_reqs.shape[0] != 1 or np.dtype(num_real_reqs.dtype) != np.int32:
        fail(f"num_real_reqs must be an int32 array with shape [1], got {describe(num_real_reqs)}")
    value = int(device.to_host(num_real_reqs)[0])
    if value < 0 or value > batch:
        fail(f"num_real_reqs[0] = {value} must be in [0, batch={batch}]")
    return value, num_real_reqs


def check_swap_in(*, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                  host_cache, device_buffer, top_k_device_locs, req_pool_indices, seq_lens,
                  lru_slots, item_size_bytes, num_top_k, hot_buffer_size, block_size,
                  num_real_reqs, miss_src, miss_dst, miss_count) -> SwapInCall:
    """Every precondition of the single-step swap-in, checked before anything is written.

    sglang's own checks come first, with its texts; then the checks sglang omits although a
    violation corrupts memory or state silently (hisparse-single-step.md section 8).
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
    _check_block_size(block_size)

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
    return SwapInCall(batch, num_real, record, num_real_array)


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


def load_cache_to_device_buffer_mla_reference(
        top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots,
        item_size_bytes, num_top_k, hot_buffer_size, page_size=1, block_size=256,
        num_real_reqs=None, miss_src=None, miss_dst=None, miss_count=None, skip_io=False) -> None:
    """NumPy oracle of :func:`load_cache_to_device_buffer_mla` (same keywords, in place).

    Mutates ``top_k_device_locs``, ``device_buffer_tokens``, ``lru_slots``, ``device_buffer``
    (unless ``skip_io``) and the plan, exactly as the kernel does. ``page_size`` and
    ``block_size`` do not change the result.
    """
    call = check_swap_in(
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
        host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
        host_cache=host_cache, device_buffer=device_buffer, top_k_device_locs=top_k_device_locs,
        req_pool_indices=req_pool_indices, seq_lens=seq_lens, lru_slots=lru_slots,
        item_size_bytes=item_size_bytes, num_top_k=num_top_k, hot_buffer_size=hot_buffer_size,
        block_size=block_size, num_real_reqs=num_real_reqs, miss_src=miss_src,
        miss_dst=miss_dst, miss_count=miss_count)
    K, H, item = int(num_top_k), int(hot_buffer_size), int(item_size_bytes)
    host_bytes = host_cache.reshape(-1).view(np.uint8)
    dev_bytes = device_buffer.reshape(-1).view(np.uint8)

    for b in range(call.batch):
        out = top_k_device_locs[b]
        if b >= call.num_real:                                    # padded row
            out[:K] = -1
            continue
        rid, seq_len, t = int(req_pool_indices[b]), int(seq_lens[b]), top_k_tokens[b, :K]
        tags, locs, lru = device_buffer_tokens[rid], device_buffer_locs[rid], lru_slots[rid]
        if seq_len <= H:                                          # fast path: position p in slot p
            count = min(seq_len, K)
            for i in range(K):
                out[i] = locs[t[i]] if i < count and t[i] >= 0 else -1
            if call.record_plan:
                miss_count[b] = 0
            continue

        newest = seq_len - 1
        want = {int(t[i]): i for i in range(K) if t[i] != newest}
        done = [bool(t[i] == newest) for i in range(K)]
        for i in range(K):
            if done[i]:
                out[i] = locs[H]
        hits, evictable = [], []
        for p in range(H):                                        # least recently used first
            slot = int(lru[p])
            tok = int(tags[slot])
            if tok >= 0 and tok in want:
                i = want[tok]
                out[i], done[i] = locs[slot], True
                hits.append(slot)
            else:
                evictable.append(slot)
        misses = [i for i in range(K) if not done[i]]
        for m, i in enumerate(misses):
            slot = evictable[m]
            src, dst = int(host_cache_locs[rid, t[i]]), int(locs[slot])
            out[i] = dst
            tags[slot] = t[i]
            if call.record_plan:
                miss_src[b, m], miss_dst[b, m] = src, dst
            if not skip_io:
                dev_bytes[dst * item:(dst + 1) * item] = host_bytes[src * item:(src + 1) * item]
        if call.record_plan:
            miss_count[b] = len(misses)
        M = len(misses)
        lru[:H] = evictable[M:] + evictable[:M] + hits


HASH_MULTIPLIER = 2654435761  # Knuth's multiplicative hash, as sglang
HASH_EMPTY = -1
LANE_BITS = 16


@cuda.jit(device=True, inline=True)
def _hash_slot(key, size):
    return ((np.int64(key) * HASH_MULTIPLIER) & 0xFFFFFFFF) % size


@cuda.jit(device=True, inline=True)
def _hash_insert(s_hash, size, key, lane):
    """Insert ``key -> lane`` (keys are distinct: validated). One int64 entry = key << 16 | lane."""
    h = _hash_slot(key, size)
    entry = (np.int64(key) << LANE_BITS) | lane
    while cuda.atomic.cas(s_hash, h, HASH_EMPTY, entry) != HASH_EMPTY:
        h += 1
        if h == size:
            h = 0


@cuda.jit(device=True, inline=True)
def _hash_find(s_hash, size, key):
    """The lane that selected ``key``, or -1."""
    h = _hash_slot(key, size)
    while True:
        entry = s_hash[h]
        if entry == HASH_EMPTY:
            return -1
        if (entry >> LANE_BITS) == key:
            return entry & 0xFFFF
        h += 1
        if h == size:
            h = 0


@functools.cache
def swap_in_kernel(num_top_k: int, hot_buffer_size: int, block_size: int, record_plan: bool,
                   skip_io: bool):
    """The fused swap-in kernel for one (K, H, block_size, record_plan, skip_io)."""
    K, H, BS = num_top_k, hot_buffer_size, block_size
    HASH_SIZE = 2 * K
    SLOTS_PER_THREAD = (H + BS - 1) // BS
    LANES_PER_THREAD = (K + BS - 1) // BS

    @cuda.jit
    def kernel(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
               host_words, device_words, top_k_device_locs, req_pool_indices, seq_lens,
               lru_slots, num_real_reqs, miss_src, miss_dst, miss_count, words_per_item):
        # Hash of the selected positions; after the hit scan, the miss copy list:
        # [0, K) host rows, [K, 2K) device rows.
        s_hash = cuda.shared.array(HASH_SIZE, np.int64)
        s_evict = cuda.shared.array(K, np.int16)      # evictable slots, least recent first
        s_done = cuda.shared.array(K, np.uint8)       # lane served by a hit or the newest slot
        s_scan = cuda.shared.array(BS, np.int32)
        s_newest = cuda.shared.array(1, np.int32)
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        out = top_k_device_locs

        if b >= num_real_reqs[0]:                     # padded row (CUDA-graph batch)
            i = tid
            while i < K:
                out[b, i] = -1
                i += BS
            return
        rid = req_pool_indices[b]
        seq_len = seq_lens[b]
        if seq_len <= H:                              # fast path: position p lives in slot p
            count = min(seq_len, K)
            i = tid
            while i < K:
                t = top_k_tokens[b, i]
                if i < count and t >= 0:
                    out[b, i] = device_buffer_locs[rid, t]
                else:
                    out[b, i] = -1
                i += BS
            if record_plan and tid == 0:
                miss_count[b] = 0
            return

        newest = seq_len - 1
        i = tid
        while i < HASH_SIZE:
            s_hash[i] = HASH_EMPTY
            i += BS
        i = tid
        while i < K:
            s_done[i] = 0
            i += BS
        if tid == 0:
            s_newest[0] = 0
        cuda.syncthreads()

        # Selected positions: the newest is served from column H, the others are hashed.
        i = tid
        while i < K:
            t = top_k_tokens[b, i]
            if t == newest:
                out[b, i] = device_buffer_locs[rid, H]
                s_done[i] = 1
                s_newest[0] = 1
            else:
                _hash_insert(s_hash, HASH_SIZE, t, i)
            i += BS
        cuda.syncthreads()

        # Hot slots in LRU order; thread tid owns positions [first, first + SLOTS_PER_THREAD).
        slot_of = cuda.local.array(SLOTS_PER_THREAD, np.int32)
        lane_of = cuda.local.array(SLOTS_PER_THREAD, np.int32)
        first = tid * SLOTS_PER_THREAD
        n_hit = 0
        n_evict = 0
        for c in range(SLOTS_PER_THREAD):
            p = first + c
            slot = 0
            lane = -1
            if p < H:
                slot = lru_slots[rid, p]
                tok = device_buffer_tokens[rid, slot]
                if tok >= 0:
                    lane = _hash_find(s_hash, HASH_SIZE, tok)
                if lane >= 0:
                    n_hit += 1
                else:
                    n_evict += 1
            slot_of[c] = slot
            lane_of[c] = lane
        # Both counts fit 16 bits (H <= 32767): one scan ranks hits and evictables together.
        before, total = block_exclusive_scan(s_scan, (n_hit << 16) | n_evict, tid, BS)
        total_hits = total >> 16
        num_misses = K - total_hits - s_newest[0]
        evictable = H - total_hits
        hit_rank = before >> 16
        evict_rank = before & 0xFFFF
        # Every thread read its lru_slots entries before the scan's first barrier: the row
        # can be rewritten in place. New order: unused evictable, filled (miss order), hits.
        for c in range(SLOTS_PER_THREAD):
            if first + c < H:
                slot = slot_of[c]
                lane = lane_of[c]
                if lane >= 0:
                    out[b, lane] = device_buffer_locs[rid, slot]
                    s_done[lane] = 1
                    lru_slots[rid, evictable + hit_rank] = slot
                    hit_rank += 1
                else:
                    if evict_rank < num_misses:
                        s_evict[evict_rank] = slot
                        lru_slots[rid, evictable - num_misses + evict_rank] = slot
                    else:
                        lru_slots[rid, evict_rank - num_misses] = slot
                    evict_rank += 1
        cuda.syncthreads()

        # Misses in lane order take the least recently used evictable slots.
        first = tid * LANES_PER_THREAD
        n_miss = 0
        for c in range(LANES_PER_THREAD):
            j = first + c
            if j < K and s_done[j] == 0:
                n_miss += 1
        m, total_misses = block_exclusive_scan(s_scan, n_miss, tid, BS)
        for c in range(LANES_PER_THREAD):
            j = first + c
            if j < K and s_done[j] == 0:
                slot = s_evict[m]
                tok = top_k_tokens[b, j]
                src = host_cache_locs[rid, tok]
                dst = device_buffer_locs[rid, slot]
                out[b, j] = dst
                device_buffer_tokens[rid, slot] = tok
                s_hash[m] = src
                s_hash[K + m] = dst
                if record_plan:
                    miss_src[b, m] = src
                    miss_dst[b, m] = dst
                m += 1
        if record_plan and tid == 0:
            miss_count[b] = total_misses
        if not skip_io:
            cuda.syncthreads()
            copy_items_flat(host_words, s_hash, 0, device_words, s_hash, K, total_misses,
                            words_per_item, tid, BS)

    return kernel


def load_cache_to_device_buffer_mla(
        top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots,
        item_size_bytes, num_top_k, hot_buffer_size, page_size=1, block_size=256,
        num_real_reqs=None, miss_src=None, miss_dst=None, miss_count=None, skip_io=False) -> None:
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
    backup. ``page_size`` is unused (as in sglang). ``skip_io`` plans without moving bytes.
    """
    call = check_swap_in(
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
        host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
        host_cache=host_cache, device_buffer=device_buffer, top_k_device_locs=top_k_device_locs,
        req_pool_indices=req_pool_indices, seq_lens=seq_lens, lru_slots=lru_slots,
        item_size_bytes=item_size_bytes, num_top_k=num_top_k, hot_buffer_size=hot_buffer_size,
        block_size=block_size, num_real_reqs=num_real_reqs, miss_src=miss_src,
        miss_dst=miss_dst, miss_count=miss_count)
    if call.batch == 0:
        return
    num_real_array = call.num_real_array
    if num_real_reqs is None:
        num_real_array = device.to_device(num_real_array)
    launch_swap_in(call.batch, int(num_top_k), int(hot_buffer_size), int(block_size), call.record_plan,
                   bool(skip_io), top_k_tokens, device_buffer_tokens, host_cache_locs,
                   device_buffer_locs, host_cache, device_buffer, top_k_device_locs,
                   req_pool_indices, seq_lens, lru_slots, num_real_array, miss_src, miss_dst,
                   miss_count, int(item_size_bytes))


def swap_in_args(record_plan, top_k_tokens, device_buffer_tokens, host_cache_locs,
                 device_buffer_locs, host_cache, device_buffer, top_k_device_locs,
                 req_pool_indices, seq_lens, lru_slots, num_real_array, miss_src, miss_dst,
                 miss_count, item_size_bytes):
    """The kernel's argument tuple, converted once (``device.kernel_array``), so that repeated
    launches (the benchmark) pay no conversion."""
    if not record_plan:
        miss_src, miss_dst, miss_count = placeholder_plan()
    args = (top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
            device.byte_words(host_cache), device.byte_words(device_buffer), top_k_device_locs,
            req_pool_indices, seq_lens, lru_slots, num_real_array, miss_src, miss_dst, miss_count)
    return tuple(device.kernel_array(a) for a in args) + (item_size_bytes // 8,)


def launch_swap_in(batch, num_top_k, hot_buffer_size, block_size, record_plan, skip_io, *arrays):
    """Launch the kernel on arguments that :func:`check_swap_in` accepted (no checks here;
    ``arrays`` are :func:`swap_in_args`' arguments after ``record_plan``)."""
    kernel = swap_in_kernel(num_top_k, hot_buffer_size, block_size, record_plan, skip_io)
    device.launch(kernel, batch, block_size, *swap_in_args(record_plan, *arrays))


def launch_prepared(batch, num_top_k, hot_buffer_size, block_size, record_plan, skip_io, args):
    """Launch with a tuple from :func:`swap_in_args` (no checks, no conversions)."""
    kernel = swap_in_kernel(num_top_k, hot_buffer_size, block_size, record_plan, skip_io)
    device.launch(kernel, batch, block_size, *args)
