"""The NumPy reference of the single-step swap-in: the oracle every kernel version matches.

Written for clarity, one batch row at a time, in the order the package docstring states the
behaviour (``__init__.py``; docs/single-step-swap-in.md).
"""

from __future__ import annotations

import numpy as np

from ...itemcopy import item_rows
from .checks import NUM_REAL_VALUE, check_swap_in, raise_swap_in_flags
from .value_checks import swap_in_flags_reference


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
