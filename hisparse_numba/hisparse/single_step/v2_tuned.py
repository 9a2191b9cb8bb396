"""Version 2, tuned: a hash, block scans and registers replace v1's lane scans, serial ranks and H-sized arrays.

One CUDA block per batch row (see the package docstring), the same arguments, grid and block as
version 1 (``v1_plain.py``). What changes, stage by stage, and why:

* hits: the selected positions go into a ``2K``-entry shared hash once, so each hot slot finds its
  lane in O(1) probes instead of scanning the K lanes;
* ranks: the m-th miss's evictable slot and each slot's new LRU position come from block-wide
  prefix scans (``blockscan.py``), not from one thread counting while the block waits;
* the old LRU order and the hit flags live in each thread's registers, not in shared memory, so
  the shared memory (``19K + 4 * block_size`` bytes, :func:`shared_memory_bytes`) no longer grows
  with H; the hash's entries are reused for the miss copy list.

``swap_in_kernel(K, H, block_size, record_plan, skip_io)`` builds the kernel for one compile-time
configuration; ``launch.py`` launches it.
"""

from __future__ import annotations

import functools

import numpy as np

from ...blockscan import block_exclusive_scan_dev
from ...device import cuda
from ...value_flags import block_fill_dev, gate_closed_dev
from ...itemcopy import copy_items_flat_dev
from .hash import HASH_EMPTY, hash_find_dev, hash_insert_dev


def shared_memory_bytes(num_top_k: int, hot_buffer_size: int, block_size: int) -> int:
    """Static shared memory of one block of this version."""
    return 19 * num_top_k + 4 * block_size + 4


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
