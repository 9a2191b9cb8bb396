"""Version 1, plain: the reference's stages in its order, a barrier between stages, no tuning.

Read it beside ``reference.py``: the shared arrays and variables carry the reference's names
(``order``, ``hit``, ``served``, ``M``, ``src``, ``dst``). One CUDA block per batch row, the same
arguments, grid and block as every version (``launch.py`` launches either). Where the reference
calls a NumPy primitive, this version does the plainest thing that is right:

* ``np.isin(slot_tags, t)``: each thread takes hot slots and scans the K lanes for the slot's tag;
* the ranks (which evictable slot the m-th miss takes, the new LRU order): thread 0 counts them,
  one slot after another, while the other threads wait at the next barrier;
* ``device_items[dst] = host_items[src]``: the whole block copies the miss list word by word.

Shared memory: ``order`` (int16 ``[H]``), ``hit`` (uint8 ``[H]``), ``served`` (uint8 ``[K]``),
``src`` (int64 ``[K]``), ``dst`` (int32 ``[K]``): ``3H + 13K + 4`` bytes (:func:`shared_memory_bytes`;
the sm_90 PTX declares 38916 at sglang's K=2048, H=4096). It grows with H, so this version stops
at the 48 KiB static limit (H = 7508 at K=2048); the launcher rejects a larger call. Lesson 16
climbs from here.
"""

from __future__ import annotations

import functools

import numpy as np

from ...device import cuda
from ...itemcopy import copy_items_flat_dev
from ...value_flags import gate_closed_dev


def shared_memory_bytes(num_top_k: int, hot_buffer_size: int, block_size: int) -> int:
    """Static shared memory of one block of this version."""
    return 3 * hot_buffer_size + 13 * num_top_k + 4


@functools.cache
def swap_in_kernel(num_top_k: int, hot_buffer_size: int, block_size: int, record_plan: bool,
                   skip_io: bool):
    """The plain swap-in kernel for one (K, H, block_size, record_plan, skip_io)."""
    K, H, BS = num_top_k, hot_buffer_size, block_size

    @cuda.jit
    def kernel(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
               host_words, device_words, top_k_device_locs, req_pool_indices, seq_lens,
               lru_slots, num_real_reqs, miss_src, miss_dst, miss_count, words_per_item, gate):
        if gate_closed_dev(gate):                     # the call's value check rejected it
            return
        order = cuda.shared.array(H, np.int16)        # lru[:H] as it was: least recently used first
        hit = cuda.shared.array(H, np.uint8)          # order[p] holds a selected position
        served = cuda.shared.array(K, np.uint8)       # lane served by the newest column or a hit
        src = cuda.shared.array(K, np.int64)          # the m-th miss: host row ...
        dst = cuda.shared.array(K, np.int32)          # ... and device row
        num_misses = cuda.shared.array(1, np.int32)   # M
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        out = top_k_device_locs

        if b >= num_real_reqs[0]:                     # padded row
            for i in range(tid, K, BS):
                out[b, i] = -1
            return
        rid = req_pool_indices[b]
        seq_len = seq_lens[b]
        if seq_len <= H:                              # fast path: position p in slot p
            for i in range(tid, K, BS):
                t = top_k_tokens[b, i]
                out[b, i] = device_buffer_locs[rid, t] if i < min(seq_len, K) and t >= 0 else -1
            if record_plan and tid == 0:
                miss_count[b] = 0
            return

        # Stage 1: the old LRU order, and the newest position served from column H.
        newest = seq_len - 1
        for p in range(tid, H, BS):
            order[p] = lru_slots[rid, p]
        for i in range(tid, K, BS):
            served[i] = 0
            if top_k_tokens[b, i] == newest:
                out[b, i] = device_buffer_locs[rid, H]
                served[i] = 1
        cuda.syncthreads()

        # Stage 2: hits. A slot whose tag is selected (and not the newest) serves that lane.
        for p in range(tid, H, BS):
            slot = order[p]
            tag = device_buffer_tokens[rid, slot]
            hit[p] = 0
            if tag >= 0 and tag != newest:
                for i in range(K):                    # np.isin: a linear scan over the lanes
                    if top_k_tokens[b, i] == tag:
                        out[b, i] = device_buffer_locs[rid, slot]
                        served[i] = 1
                        hit[p] = 1
                        break
        cuda.syncthreads()

        if tid == 0:
            # Stage 3: the m-th miss (lane order) takes the m-th evictable slot (LRU order).
            M = 0
            e = 0
            for i in range(K):
                if served[i] == 0:
                    while hit[e] != 0:
                        e += 1
                    slot = order[e]
                    e += 1
                    t = top_k_tokens[b, i]
                    src[M] = host_cache_locs[rid, t]
                    dst[M] = device_buffer_locs[rid, slot]
                    out[b, i] = dst[M]
                    device_buffer_tokens[rid, slot] = t
                    if record_plan:
                        miss_src[b, M] = src[M]
                        miss_dst[b, M] = dst[M]
                    M += 1
            if record_plan:
                miss_count[b] = M
            num_misses[0] = M
            # Stage 4: lru = evictable[M:] + filled + order[hit], three walks over the old order.
            n = 0
            for walk in range(3):
                e = 0
                for p in range(H):
                    if hit[p] == 0:
                        take = (walk == 0 and e >= M) or (walk == 1 and e < M)
                        e += 1
                    else:
                        take = walk == 2
                    if take:
                        lru_slots[rid, n] = order[p]
                        n += 1
        cuda.syncthreads()

        # Stage 5: the copies, device_items[dst] = host_items[src].
        if not skip_io:
            copy_items_flat_dev(host_words, src, 0, device_words, dst, 0, num_misses[0],
                                words_per_item, tid, BS)

    return kernel
