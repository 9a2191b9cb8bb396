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

Validation (``swap_in_checks.py``) proves the preconditions that the kernel relies on and that
sglang leaves unchecked, with one check-kernel launch and one small read-back; a rejected call
writes nothing. The behaviour reproduced is described in ``docs/single-step-swap-in.md``.

Read top-down: the NumPy reference, the kernel with its device functions, then the launchers
(``launch_unchecked(call)`` launches a :class:`SwapInCall` that ``check_swap_in`` accepted;
``load_cache_to_device_buffer_mla`` is the two together).

Lessons: 00 (the hot buffer), 05 (plan dtypes), 06 (plan and replay together), 07 (plan row
strides), 08 (padded batches), 09 (hot buffer size), 13 (capstone).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import device, value_flags
from ..checks import launch_then_settle
from ..blockscan import block_exclusive_scan_dev
from ..device import cuda
from ..value_flags import block_fill_dev, gate_closed_dev
from ..itemcopy import copy_items_flat_dev, item_rows
from .miss_plan import placeholder_plan
from .swap_in_checks import (NUM_REAL_VALUE, SwapInCall, check_swap_in, raise_swap_in_flags,
                             settle_swap_in)
from .swap_in_hash import HASH_EMPTY, hash_find_dev, hash_insert_dev
from .swap_in_value_checks import swap_in_flags_reference

__all__ = ["SwapInCall", "check_swap_in", "kernel_args", "launch_unchecked", "settle_swap_in",
           "load_cache_to_device_buffer_mla", "load_cache_to_device_buffer_mla_reference",
           "swap_in_kernel"]


def load_cache_to_device_buffer_mla_reference(
        top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots,
        item_size_bytes, num_top_k, hot_buffer_size, page_size=1, block_size=256,
        num_real_reqs=None, miss_src=None, miss_dst=None, miss_count=None, skip_io=False) -> None:
    """NumPy oracle of :func:`load_cache_to_device_buffer_mla` (same keywords, in place).

    Mutates ``top_k_device_locs``, ``device_buffer_tokens``, ``lru_slots``, ``device_buffer``
    (unless ``skip_io``) and the plan, exactly as the kernel does. ``page_size`` and
    ``block_size`` do not change the result. Rejects what the launcher rejects, with its messages
    (the value check in NumPy: ``swap_in_flags_reference``).
    """
    call = check_swap_in(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                         host_cache, device_buffer, top_k_device_locs, req_pool_indices, seq_lens,
                         lru_slots, item_size_bytes, num_top_k, hot_buffer_size, page_size, block_size,
                         num_real_reqs, miss_src, miss_dst, miss_count, skip_io, checks="shapes")
    flags = swap_in_flags_reference(call)
    raise_swap_in_flags(flags, call)
    num_real = flags[NUM_REAL_VALUE][1]
    K, H, item = call.num_top_k, call.hot_buffer_size, call.item_size_bytes
    host_items, device_items = item_rows(host_cache, item), item_rows(device_buffer, item)

    for b in range(call.batch):
        out = top_k_device_locs[b, :K]
        if b >= num_real:                                         # padded row
            out[:] = -1
            continue
        rid, seq_len, t = int(req_pool_indices[b]), int(seq_lens[b]), top_k_tokens[b, :K]
        tags, locs, lru = device_buffer_tokens[rid], device_buffer_locs[rid], lru_slots[rid]
        if seq_len <= H:                                          # fast path: position p in slot p
            read = (np.arange(K) < min(seq_len, K)) & (t >= 0)
            out[:] = np.where(read, locs[np.where(read, t, 0)], -1)
            if call.record_plan:
                call.miss_count[b] = 0
            continue

        newest = seq_len - 1
        order = lru[:H].astype(np.int64)                          # slots, least recently used first
        slot_tags = tags[order]
        is_newest = t == newest
        out[is_newest] = locs[H]
        hit = (slot_tags >= 0) & (slot_tags != newest) & np.isin(slot_tags, t)
        by_position = np.argsort(t)
        hit_lanes = by_position[np.searchsorted(t, slot_tags[hit], sorter=by_position)]
        out[hit_lanes] = locs[order[hit]]
        served = is_newest.copy()
        served[hit_lanes] = True
        misses = np.flatnonzero(~served)                          # lane order
        M = misses.size
        evictable = order[~hit]                                   # LRU order
        filled = evictable[:M]                                    # the m-th miss takes the m-th
        src, dst = host_cache_locs[rid, t[misses]], locs[filled]
        out[misses] = dst
        tags[filled] = t[misses]
        if call.record_plan:
            call.miss_src[b, :M], call.miss_dst[b, :M], call.miss_count[b] = src, dst, M
        if not call.skip_io:
            device_items[dst] = host_items[src]
        lru[:H] = np.concatenate([evictable[M:], filled, order[hit]])


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
               lru_slots, num_real_reqs, miss_src, miss_dst, miss_count, words_per_item, gate):
        if gate_closed_dev(gate):                     # the call's value check rejected it
            return
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
        block_fill_dev(s_hash, HASH_SIZE, HASH_EMPTY, tid, BS)
        block_fill_dev(s_done, K, 0, tid, BS)
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
                hash_insert_dev(s_hash, HASH_SIZE, t, i)
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
                    lane = hash_find_dev(s_hash, HASH_SIZE, tok)
                if lane >= 0:
                    n_hit += 1
                else:
                    n_evict += 1
            slot_of[c] = slot
            lane_of[c] = lane
        # Both counts fit 16 bits (H <= 32767): one scan ranks hits and evictables together.
        before, total = block_exclusive_scan_dev(s_scan, (n_hit << 16) | n_evict, tid, BS)
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
        m, total_misses = block_exclusive_scan_dev(s_scan, n_miss, tid, BS)
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
            copy_items_flat_dev(host_words, s_hash, 0, device_words, s_hash, K, total_misses,
                            words_per_item, tid, BS)

    return kernel


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


def launch_unchecked(call: SwapInCall, prepared_args: tuple | None = None) -> None:
    """Launch the swap-in kernel on ``call`` as it is: no checks.

    ``call`` comes from :func:`check_swap_in` (the public launcher does exactly that), or is built
    by hand in a lesson that shows what an unchecked input does. ``prepared_args``: the tuple of
    :func:`kernel_args` for this call, when the caller converted it already.
    """
    if call.batch == 0:
        return
    kernel = swap_in_kernel(call.num_top_k, call.hot_buffer_size, call.block_size, call.record_plan,
                            call.skip_io)
    args = kernel_args(call) if prepared_args is None else prepared_args
    device.launch(kernel, call.batch, call.block_size, *args)


def load_cache_to_device_buffer_mla(
        top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots,
        item_size_bytes, num_top_k, hot_buffer_size, page_size=1, block_size=256,
        num_real_reqs=None, miss_src=None, miss_dst=None, miss_count=None, skip_io=False,
        checks="full") -> None:
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
    pass, before anything is written (``swap_in_checks``); ``checks="shapes"`` skips that pass, for
    callers that validated the values upstream: an invalid value then corrupts memory silently.
    """
    call = check_swap_in(
        top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots, item_size_bytes,
        num_top_k, hot_buffer_size, page_size, block_size, num_real_reqs, miss_src, miss_dst,
        miss_count, skip_io, checks, defer=True)
    launch_then_settle(call, launch_unchecked, settle_swap_in)   # gated kernel, then the verdict
