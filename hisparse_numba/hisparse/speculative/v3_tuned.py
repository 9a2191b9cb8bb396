"""The speculative swap kernel: one launch resolves every occurrence and commits every request.

``swap_kernel(reps, committer, record)`` builds the kernel for one compile-time configuration. Grid
``(batch, tiles [+ copiers + 1 committer])`` x ``tile`` threads (``tile <= MAX_THREADS``); the
sizes of a call are runtime values read from its arrays: ``steps, top_k = top_k_tokens.shape[1:]``,
``T = steps * top_k``, ``H = cache_policy.shape[1]`` and ``tile = blockDim.x``, so one compiled
kernel serves every size (its shared arrays have the documented maxima, ``MAX_OCCURRENCES`` and
``MAX_THREADS`` entries). The stages (classify, count, number, duplicates, finish, copy) and the
roles of the tiles (tiles, copier tiles, the committer) are in the package docstring
(``__init__.py``). The commit follows ``reference.py`` step by step with the same names, its stages
in ``commit.py``; docs/speculative-swap-in.md states the behaviour. Lessons 01, 03, 04 and 08
launch it through ``launch.py``.
"""

from __future__ import annotations

import functools

import numpy as np

from ...blockscan import block_exclusive_scan_dev
from ...device import cuda, jit_kernel
from ...value_flags import gate_closed_dev
from ...itemcopy import copy_item_dev, copy_items_flat_dev
from .hash import MASK32, SETTLE_CELLS, clear_cells_dev, hash_insert_dev
from .state import (COMPACT_POS_MASK, COUNT_GEN, COUNT_LAST, COUNT_UNION, COUNT_WORK,
                          MAX_OCCURRENCES, UNRESOLVED, clock_bits_dev, next_epoch_dev,
                          next_sigma_dev, pack_clock_dev, pack_generation_dev)
from .commit import (admit_dev, approximate_victims_dev, count_victims_dev, evict_victims_dev,
                     index_misses_dev, union_victims_dev, warm_l1_dev)
from .device_fns import (CLAIMED, COUNTED, HOLD_WORDS, HOT, LANES, MAX_THREADS, MISS, NUMBERED,
                         TAIL, claim_token_dev, classify_dev, direct_locations_dev,
                         load_coherent_dev, needs_victim_dev, promote_victim_dev, publish_dev,
                         table_insert_dev, take_slot_dev, wait_for_tiles_dev,
                         warp_wait_for_tiles_dev)


@functools.cache
def swap_kernel(reps: int, committer: bool, record: bool):
    """The swap kernel for one compile-time configuration: each thread resolves ``reps``
    consecutive occurrences; one committer tile per request when ``committer``; the miss plan is
    written when ``record``."""

    @cuda.jit(device=True, inline=True)
    def wait_for_arrivals_dev(counters, b, arrivals, tid):
        """With a committer tile: spin until ``arrivals`` tiles (and copier tiles) have arrived."""
        if committer and tid == 0:
            while load_coherent_dev(counters, (b, 1)) < arrivals:
                pass
            cuda.threadfence()
        cuda.syncthreads()

    @cuda.jit(device=True, inline=True)
    def finish_request_dev(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                           host_words, dev_words, out, seq_lens, cache_index, cache_policy,
                           scratch_locs, scratch_state, metadata, miss_src, miss_dst, miss_count,
                           counters, flags, claim_keys, claim_first, unique_token, unique_claim,
                           words_per_item, rid, victims, aux, scan, flag, cells):
        """The commit of request ``b`` by one whole tile: the committer tile, which waits for the
        tiles stage by stage, or the last tile to arrive, for which every stage is done. Once every
        tile has counted: the mode, and in union mode the victims, which evict their slots' tokens
        from the hash. Once every tile has numbered: the index of the scratch table (by the last
        tile when there are copier tiles), in approximate mode admission, victims and evictions,
        then the misses' tokens into their slots and the hash. Once every tile (and copier tile)
        has arrived: the workspace reset, promotion, direct overflow, counters. (At most 29
        arguments: Python passes a longer call as ``*args``, which Numba cannot inline.)"""
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        tile = cuda.blockDim.x
        n = scratch_locs.shape[0]           # request slots: the counter banks' stride
        steps, top_k = top_k_tokens.shape[1], top_k_tokens.shape[2]
        t = steps * top_k
        hot = cache_policy.shape[1]
        tiles = -(-t // (tile * reps))
        tail = device_buffer_tokens.shape[1] - hot
        cbits, ebits = clock_bits_dev(hot)
        cmask, emask = (1 << cbits) - 1, (1 << ebits) - 1
        index = t                 # int64 word of index entry 0 in a metadata row (after T table entries)
        compact = 4 * t           # int32 column of compact entry 0 (after 2T int64 words)
        row = rid + 1
        cap = scratch_locs.shape[1]
        packed = np.int64(load_coherent_dev(cache_policy, (0, rid)))
        e_now = next_epoch_dev(packed, cbits, ebits)
        cursor = (packed & MASK32) & cmask
        gen = np.int64(scratch_state[0, COUNT_GEN * n + rid])
        degraded = gen < 0
        sigma = next_sigma_dev(gen)
        if tid == 0:
            flag[0] = 0
        clear_cells_dev(cells, tid, tile)     # for the hash inserts, long after the next barrier
        if committer:
            # while the tiles classify: the commit then reads the banks and the slots from L1,
            # not through an L2 that the copier tiles' host reads keep busy
            scan[tid] = warm_l1_dev(cache_index, device_buffer_tokens, device_buffer_locs, rid,
                                    hot, tid, tile) & 0x7FFFFFFF
        u0 = u1 = base = num_victims = np.int64(0)
        copiers = cuda.gridDim.y - tiles - 1 if committer else 0
        # scratch location tid, which tells whether miss tid needs a victim, read while waiting
        known_loc = scratch_locs[rid, tid] if tid < cap else np.int32(-1)
        # every tile has counted: the number of unique misses, and the union hits (added before)
        share = wait_for_tiles_dev(flags, b, COUNTED, tiles, tid, tile)
        union_hits = np.int64(load_coherent_dev(scratch_state, (0, COUNT_UNION * n + rid)))
        _, num_misses = block_exclusive_scan_dev(scan, share, tid, tile)
        overflow = num_misses > cap
        union_mode = num_misses + union_hits <= hot
        if union_mode:
            u0, u1, base, num_victims = count_victims_dev(scratch_state, scratch_locs, rid, row,
                                                          num_misses, cap, True, compact,
                                                          known_loc, scan, tid, tile)
            union_victims_dev(cache_policy, scratch_state, scratch_locs, rid, row, num_misses, cap,
                              compact, cursor, hot, e_now, emask, victims, aux, flag, u0, u1, base,
                              known_loc, tid)
            evict_victims_dev(cache_index, device_buffer_tokens, device_buffer_locs, scratch_state,
                              scratch_locs, victims, rid, row, cap, True, compact, u0, u1, base,
                              known_loc, tid)
        # every tile has numbered its misses. With copier tiles, the last tile indexes them before
        # it arrives, and the wait for the arrivals below covers both
        if copiers == 0:
            wait_for_tiles_dev(flags, b, NUMBERED, tiles, tid, tile)
            index_misses_dev(metadata, scratch_state, claim_keys, claim_first, unique_token,
                             unique_claim, b, row, t, sigma, 0, num_misses, tid, tile)
            cuda.threadfence()
            cuda.syncthreads()
        # every tile has arrived (a tile holding later occurrences of a missed token reads their
        # scratch locations, which promotion swaps; the last one has indexed the misses), and
        # every copier tile has read the flags
        wait_for_arrivals_dev(counters, b, tiles + copiers, tid)
        j = tid
        while j < 3 * tiles:
            flags[b, j // tiles, j % tiles] = 0
            j += tile
        if tid == 0:
            counters[b, 0] = 0
            counters[b, 1] = 0
        if not union_mode:
            admit_dev(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                      seq_lens, cache_index, cache_policy, scratch_state, metadata, b, rid, row, t,
                      sigma, e_now, num_misses, union_hits, cap, tail, degraded, scan, tid, tile)
            u0, u1, base, num_victims = count_victims_dev(scratch_state, scratch_locs, rid, row,
                                                          num_misses, cap, False, compact,
                                                          known_loc, scan, tid, tile)
            approximate_victims_dev(cache_policy, scratch_state, scratch_locs, rid, row,
                                    num_misses, cap, compact, cursor, hot, e_now, victims, aux,
                                    flag, u0, u1, base, t, known_loc, tid)
            evict_victims_dev(cache_index, device_buffer_tokens, device_buffer_locs, scratch_state,
                              scratch_locs, victims, rid, row, cap, False, compact, u0, u1, base,
                              known_loc, tid)
        # each miss takes its victim's slot: its token enters the slot (and its hash insert is
        # staged: ``aux``, and ``scan`` for the token), then promotion (zero-copy) or direct
        # overflow in place; one pass, so that the loads of both are in flight together
        cuda.syncthreads()
        i = base
        for u in range(u0, u1):
            if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, union_mode, compact,
                                known_loc, tid):
                take_slot_dev(device_buffer_tokens, unique_token, victims, aux, scan, i, u, b, t,
                              rid)
                promote_victim_dev(device_buffer_locs, scratch_locs, scratch_state, metadata,
                                   victims, i, u, rid, row, index, compact, cap, sigma)
                i += 1
        cuda.syncthreads()
        hash_insert_dev(cache_index, rid, device_buffer_tokens, victims, num_victims, aux, flag,
                        scan, cells, tid, tile, True)
        warps = tile // LANES
        warp = tid // LANES
        lane = tid % LANES
        if overflow:
            u = cap + warp
            while u < num_misses:
                p = scratch_state[row, compact + u] & COMPACT_POS_MASK
                dst = metadata[row, index + p] & MASK32
                if dst != UNRESOLVED:
                    src = host_cache_locs[rid, load_coherent_dev(metadata, (row, p)) & MASK32]
                    copy_item_dev(host_words, src, dev_words, dst, words_per_item, lane, LANES)
                    if record and lane == 0:
                        miss_src[b, u] = src
                        miss_dst[b, u] = dst
                elif record and lane == 0:
                    miss_src[b, u] = -1
                    miss_dst[b, u] = -1
                u += warps
        if overflow:
            direct_locations_dev(out, scratch_state, metadata, b, row, index, compact, t, top_k, tid,
                                 tile)
        if tid == 0:
            scratch_state[0, COUNT_LAST * n + rid] = num_misses
            scratch_state[0, COUNT_WORK * n + rid] = 0
            scratch_state[0, COUNT_UNION * n + rid] = 0
            scratch_state[0, COUNT_GEN * n + rid] = pack_generation_dev(sigma,
                                                                        degraded or flag[0] != 0)
            cache_policy[0, rid] = pack_clock_dev(e_now, (cursor + min(num_misses,
                                                  np.int64(hot))) % hot, cbits)
            if record:
                miss_count[b] = num_misses


    @cuda.jit(device=True, inline=True)
    def arrive_dev(counters, b, tiles):
        """Count this tile as arrived at request ``b``: 1 if it was the last one and so finishes
        the request, else 0 (always 0 with a committer tile, which finishes it instead)."""
        last = cuda.atomic.add(counters, (b, 1), 1) == tiles - 1
        return 1 if last and not committer else 0

    @cuda.jit(device=True, inline=True)
    def list_entry_dev(lists, tiles, g, b, t):
        """Where item ``g`` of the request's miss list is: tile ``j`` listed ``lists[j]`` items at
        ``b * T + j * tile * reps``, in tile order."""
        for j in range(tiles):
            if g < lists[j]:
                return b * t + j * cuda.blockDim.x * reps + g
            g -= lists[j]
        return -1

    @cuda.jit(device=True, inline=True)
    def copy_share_dev(host_words, dev_words, counters, flags, claim_dst, copy_src, copy_dst, b, t,
                       tiles, copier, copiers, words_per_item, tid, tile, lists):
        """Copier tile ``copier`` of ``copiers``. Once every tile of request ``b`` has CLAIMED,
        the request's unique misses are listed (host location, claim position; the thread that
        inserted the token listed it): each loader warp reads one item from the host into its
        registers at once (item ``copier + copiers * loader``), long before the tiles have
        numbered the misses. The first warp waits for NUMBERED, tells the loaders and arrives, so
        that the committer resets the flags only after that. A loader then writes its item to
        its destination (``claim_dst``, read by the tiles before any promotion), and copies the
        items no loader held. With a one-warp tile, that warp does all of it. ``lists`` (shared,
        > tiles + 2) takes each tile's number of listed misses, then two counters."""
        wait_for_tiles_dev(flags, b, CLAIMED, tiles, tid, tile)
        j = tid
        while j < tiles:
            lists[j] = load_coherent_dev(flags, (b, CLAIMED, j)) - 1
            j += tile
        if tid == 0:
            lists[tiles] = 0           # tiles seen NUMBERED
            lists[tiles + 1] = 0       # 1 once every tile has NUMBERED
        cuda.syncthreads()
        num_misses = 0
        for j in range(tiles):
            num_misses += lists[j]
        warp, lane = tid // LANES, tid % LANES
        warps = tile // LANES
        loaders = max(1, warps - 1)
        loader = warp - 1 if warps > 1 else 0
        is_loader = warps == 1 or warp > 0
        held = cuda.local.array(HOLD_WORDS, np.int64)
        holds = words_per_item <= HOLD_WORDS * LANES
        entry = np.int64(-1)
        g = copier + copiers * loader
        if is_loader and holds and g < num_misses:
            entry = list_entry_dev(lists, tiles, g, b, t)
            src = copy_src[entry] * words_per_item
            for h in range(HOLD_WORDS):      # a fixed trip count: held stays in registers
                w = lane + h * LANES
                if w < words_per_item:
                    held[h] = host_words[src + w]
        if warp == 0:
            warp_wait_for_tiles_dev(flags, b, NUMBERED, tiles, lane, lists, tiles)
            if lane == 0:
                cuda.atomic.exch(lists, tiles + 1, 1)
                cuda.atomic.add(counters, (b, 1), 1)     # done with the flags
        if not is_loader:
            return
        while cuda.atomic.add(lists, tiles + 1, 0) == 0:
            pass
        if entry >= 0:
            dst = np.int64(load_coherent_dev(claim_dst, (b, copy_dst[entry])))
            if dst >= 0:
                dst *= words_per_item
                for h in range(HOLD_WORDS):
                    w = lane + h * LANES
                    if w < words_per_item:
                        dev_words[dst + w] = held[h]
        g = (loaders * copiers if holds else 0) + copier * loaders + loader
        while g < num_misses:
            entry = list_entry_dev(lists, tiles, g, b, t)
            dst = np.int64(load_coherent_dev(claim_dst, (b, copy_dst[entry])))
            if dst >= 0:
                copy_item_dev(host_words, copy_src[entry], dev_words, dst, words_per_item, lane,
                              LANES)
            g += loaders * copiers

    @jit_kernel(max_threads=MAX_THREADS)
    def swap(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_words,
             dev_words, out, req_pool_indices, seq_lens, cache_index, cache_policy, scratch_locs,
             scratch_state, metadata, num_real_reqs, miss_src, miss_dst, miss_count, counters,
             flags, claim_keys, claim_first, claim_unique, claim_dst, unique_token, unique_claim,
             copy_src, copy_dst, words_per_item, tail, n, gate):
        b = cuda.blockIdx.x
        # three independent loads in flight together (each is a round trip to L2 or memory
        # before the first occurrence is read); req_pool_indices has the grid's batch rows, so
        # rid is read in bounds, but it is used only once the gate is known to be open
        closed = gate_closed_dev(gate)      # the call's value check rejected it
        real = b < num_real_reqs[0]
        rid = req_pool_indices[b]
        tid = cuda.threadIdx.x
        tile = cuda.blockDim.x
        steps, top_k = top_k_tokens.shape[1], top_k_tokens.shape[2]
        t = steps * top_k
        hot = cache_policy.shape[1]
        if closed or not real:      # one branch on both loads, so neither waits for the other
            if not closed:
                for r in range(reps):
                    occ = (cuda.blockIdx.y * tile + tid) * reps + r
                    if occ < t:
                        out[b, occ // top_k, occ % top_k] = 0
                if record and cuda.blockIdx.y == 0 and tid == 0:
                    miss_count[b] = 0
            return
        tiles = -(-t // (tile * reps))      # tiles per request
        copiers = cuda.gridDim.y - tiles - 1 if committer else 0
        shared = cuda.shared.array(6, np.int32)   # ticket, hits, firsts before, last, has dups, listed
        scan = cuda.shared.array(MAX_THREADS, np.int32)
        victims = cuda.shared.array(MAX_OCCURRENCES, np.int16)  # per victim ordinal: its slot, -1 = none yet
        aux = cuda.shared.array(MAX_OCCURRENCES, np.int16)      # walk positions, fallback list, hash-insert state
        flag = cuda.shared.array(2, np.int32)     # hash degraded, a proposal this round
        cells = cuda.shared.array(SETTLE_CELLS, np.int32)   # the hash inserts' settle table
        claim = cuda.local.array(reps, np.int32)   # claim position of a missed occurrence, or -1
        token = cuda.local.array(reps, np.int32)
        host_src = cuda.local.array(reps, np.int64)   # host location of a missed occurrence
        is_first = cuda.local.array(reps, np.int32)
        if tid == 0:
            # tiles take their index from a ticket, so a tile only ever waits for tiles that started
            shared[0] = cuda.atomic.add(counters, (b, 0), 1)
            shared[1] = 0
            shared[2] = 0
            shared[3] = 0
            shared[4] = 0
            shared[5] = 0
        # the request's clock and generation, in flight with the ticket (the commit writes them
        # only after every tile has arrived)
        packed_clock = np.int64(cache_policy[0, rid])
        gen = np.int64(scratch_state[0, COUNT_GEN * n + rid])
        cuda.syncthreads()
        y = shared[0]
        first = (y * tile + tid) * reps          # this thread's occurrences: first .. first+reps-1
        row = rid + 1
        cap = scratch_locs.shape[1]
        cbits, ebits = clock_bits_dev(hot)
        e_now = next_epoch_dev(packed_clock, cbits, ebits)
        degraded = gen < 0
        sigma = next_sigma_dev(gen)

        is_committer = committer and y == tiles + copiers
        base = 0                                  # first misses in the earlier tiles
        num_copies = 0
        if committer and y >= tiles and not is_committer:   # (compiled only with a committer)
            copy_share_dev(host_words, dev_words, counters, flags, claim_dst, copy_src, copy_dst,
                           b, t, tiles, y - tiles, copiers, words_per_item, tid, tile, scan)
            return
        if not is_committer:   # (the committer took the last ticket: every tile has started)
            # 1. classify: outputs of non-misses, stamps, scratch-table inserts, claims of
            # missed tokens; with copier tiles, the inserting thread lists the token's host
            # location and claim position for them (from ``b * T + y * tile * reps``)
            for r in range(reps):
                occ = first + r
                claim[r] = -1
                is_first[r] = 0
                if occ < t:
                    kind, val, tok = classify_dev(top_k_tokens, seq_lens, device_buffer_tokens,
                                                  device_buffer_locs, host_cache_locs, cache_index,
                                                  b, rid, occ, top_k, steps, hot, tail, degraded)
                    location = np.int64(-1)
                    if kind == TAIL:
                        location = val
                    elif kind == HOT:
                        location = device_buffer_locs[rid, val]
                        if cuda.atomic.exch(cache_policy, (row, val), np.int32(e_now)) != e_now:
                            cuda.atomic.add(shared, 1, 1)
                    elif kind == MISS:
                        table_insert_dev(metadata, row, t, sigma, tok)
                        p, inserted = claim_token_dev(claim_keys, b, tok)
                        cuda.atomic.min(claim_first, (b, p), np.int32(occ))
                        if inserted and copiers > 0:
                            listed = b * t + y * tile * reps + cuda.atomic.add(shared, 5, 1)
                            copy_src[listed] = val
                            copy_dst[listed] = p
                        claim[r] = p
                        token[r] = tok
                        host_src[r] = val
                    if kind != MISS:
                        out[b, occ // top_k, occ % top_k] = location
            cuda.syncthreads()
            if tid == 0 and shared[1] > 0:
                cuda.atomic.add(scratch_state, (0, COUNT_UNION * n + rid), shared[1])
            publish_dev(flags, b, CLAIMED, y, shared[5] + 1, tid)

            # 2. once the earlier tiles have claimed, an occurrence is its token's first iff
            # claim_first names it (later tiles only add larger occurrences); rank the firsts
            wait_for_tiles_dev(flags, b, CLAIMED, y, tid, tile)
            count = 0
            for r in range(reps):
                if claim[r] >= 0:
                    if load_coherent_dev(claim_first, (b, claim[r])) == first + r:
                        is_first[r] = 1
                        count += 1
                    else:
                        shared[4] = 1
            rank, num_first = block_exclusive_scan_dev(scan, count, tid, tile)
            publish_dev(flags, b, COUNTED, y, num_first + 1, tid)
            before = wait_for_tiles_dev(flags, b, COUNTED, y, tid, tile)
            if before > 0:
                cuda.atomic.add(shared, 2, before)
            cuda.syncthreads()
            base = shared[2]

            # 3. unique_idx = base + rank: outputs, plan, and the destination of each scratch
            # miss: for the copier tiles by claim position, else in this tile's copy list
            u = base + rank
            copies = 0
            for r in range(reps):
                if is_first[r] == 1:
                    claim_unique[b, claim[r]] = u
                    unique_token[b * t + u] = token[r]
                    unique_claim[b * t + u] = claim[r]
                    occ = first + r
                    dst = np.int64(-1)
                    if u < cap:
                        dst = scratch_locs[rid, u]
                        out[b, occ // top_k, occ % top_k] = dst
                        if record:
                            miss_src[b, u] = host_src[r] if dst >= 0 else -1
                            miss_dst[b, u] = dst if dst >= 0 else -1
                    else:
                        out[b, occ // top_k, occ % top_k] = -2 - u
                    if copiers > 0:
                        claim_dst[b, claim[r]] = dst
                    elif dst >= 0:
                        copies += 1
                    u += 1
            if copiers == 0:
                entry, num_copies = block_exclusive_scan_dev(scan, copies, tid, tile)
                entry += b * t + base
                u = base + rank
                for r in range(reps):
                    if is_first[r] == 1:
                        if u < cap and scratch_locs[rid, u] >= 0:
                            copy_src[entry] = host_src[r]
                            copy_dst[entry] = scratch_locs[rid, u]
                            entry += 1
                        u += 1
            if tid == 0 and num_first > 0:
                cuda.atomic.add(scratch_state, (0, COUNT_WORK * n + rid), num_first)

            # 4. publish NUMBERED. A tile holding later occurrences of missed tokens then waits
            # for NUMBERED of the earlier tiles and gives them their first occurrence's location;
            # with copier tiles, the last tile waits for them too and indexes the request's misses
            # (its SM, unlike theirs, reads nothing from the host). These two arrive (the
            # per-request arrival counter) only after that, the others at once.
            publish_dev(flags, b, NUMBERED, y, 1, tid)
            dups = shared[4]
            indexer = copiers > 0 and y == tiles - 1
            if tid == 0 and dups == 0 and not indexer:
                shared[3] = arrive_dev(counters, b, tiles)
            if dups == 1 or indexer:
                wait_for_tiles_dev(flags, b, NUMBERED, y, tid, tile)
                if dups == 1:
                    for r in range(reps):
                        if claim[r] >= 0 and is_first[r] == 0:
                            u = load_coherent_dev(claim_unique, (b, claim[r]))
                            occ = first + r
                            loc = scratch_locs[rid, u] if u < cap else -2 - u
                            out[b, occ // top_k, occ % top_k] = loc
                if indexer:
                    index_misses_dev(metadata, scratch_state, claim_keys, claim_first,
                                     unique_token, unique_claim, b, row, t, sigma, 0,
                                     base + num_first, tid, tile)
                cuda.syncthreads()
                if tid == 0:
                    cuda.threadfence()
                    shared[3] = arrive_dev(counters, b, tiles)
        cuda.syncthreads()

        # 5. the committer tile, or without one the last tile to arrive_dev, finishes the request.
        # Copy destinations were read above, before the commit can swap scratch locations.
        if is_committer or shared[3] == 1:
            finish_request_dev(top_k_tokens, device_buffer_tokens, host_cache_locs,
                               device_buffer_locs, host_words, dev_words, out, seq_lens,
                               cache_index, cache_policy, scratch_locs, scratch_state, metadata,
                               miss_src, miss_dst, miss_count, counters, flags, claim_keys,
                               claim_first, unique_token, unique_claim, words_per_item, rid,
                               victims, aux, scan, flag, cells)

        # 6. this tile's scratch copies (host -> scratch locations), unless copier tiles take them;
        # a committer tile has none
        start = b * t + base
        copy_items_flat_dev(host_words, copy_src, start, dev_words, copy_dst, start, num_copies,
                        words_per_item, tid, tile)

    return swap
