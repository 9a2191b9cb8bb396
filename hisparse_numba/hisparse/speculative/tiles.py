"""The stages a tile runs in the tiled kernel versions (``v2_tiles``, ``v3_tuned``): classify, count,
number, duplicates, and the request's arrival.

A *tile* is one block holding ``blockDim.x * reps`` consecutive occurrences of one request; it
takes its index ``y`` from the request's ticket, so it only ever waits for tiles that started
before it. Each stage is a device function of one whole tile, named after the stage of
``reference.request_reference`` it computes (docs/speculative-swap-in.md, "The kernel's stages").
Compile-time switches of the kernel (``reps``, ``copiers > 0``, ``record``, ``committer``) come in as
arguments; the functions are inlined, so they fold away as constants would.

The arrays come in groups, each a tuple in this order:

* ``sel``: top_k_tokens, seq_lens, device_buffer_tokens, device_buffer_locs, host_cache_locs;
* ``state``: cache_index, cache_policy, scratch_locs, scratch_state, metadata (int64 view);
* ``work``: the ``Workspace`` (``launch.py``): counters, flags, claim_keys, claim_first,
  claim_unique, claim_dst, unique_token, unique_claim, copy_src, copy_dst;
* ``plan``: miss_src, miss_dst, miss_count.

``shared`` (int32[6]) holds the tile's ticket, its new union hits, the first misses of the earlier
tiles, whether it finishes the request, whether it holds a later occurrence of a missed token,
and how many tokens it listed for the copier tiles.
"""

from __future__ import annotations

import numpy as np

from ...blockscan import block_exclusive_scan_dev
from ...device import cuda
from .device_fns import (CLAIMED, COUNTED, HOT, MISS, NUMBERED, TAIL, claim_token_dev, classify_dev,
                         load_coherent_dev, publish_dev, table_insert_dev, wait_for_tiles_dev)
from .commit import index_misses_dev
from .state import COUNT_UNION, COUNT_WORK


@cuda.jit(device=True, inline=True)
def classify_tile_dev(sel, state, work, out, b, rid, first, y, e_now, sigma, degraded, tail, n,
                      reps, copiers, shared, claim, token, host_src, is_first, tid):
    """1. classify: outputs of non-misses, stamps of hits, scratch-table inserts, and a claim of
    every missed token; with copier tiles, the inserting thread lists the token's host location
    and claim position for them. Publishes CLAIMED."""
    top_k_tokens, seq_lens, device_buffer_tokens, device_buffer_locs, host_cache_locs = sel
    cache_index, cache_policy, scratch_locs, scratch_state, metadata = state
    claim_keys, claim_first, copy_src, copy_dst = work[2], work[3], work[8], work[9]
    steps, top_k = top_k_tokens.shape[1], top_k_tokens.shape[2]
    t, hot, row = steps * top_k, cache_policy.shape[1], rid + 1
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
                    listed = b * t + y * cuda.blockDim.x * reps + cuda.atomic.add(shared, 5, 1)
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
    publish_dev(work[1], b, CLAIMED, y, shared[5] + 1, tid)


@cuda.jit(device=True, inline=True)
def count_tile_dev(work, b, first, y, reps, claim, is_first, shared, scan, tid, tile):
    """2. count: once the earlier tiles have claimed, an occurrence is its token's first iff
    claim_first names it (later tiles only add larger occurrences). Ranks the firsts, publishes
    COUNTED, and returns (rank, firsts in this tile, firsts in the earlier tiles)."""
    flags, claim_first = work[1], work[3]
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
    return rank, num_first, shared[2]


@cuda.jit(device=True, inline=True)
def number_tile_dev(work, plan, out, scratch_locs, scratch_state, b, rid, t, n, base, rank,
                    num_first, first, reps, record, copiers, claim, token, host_src, is_first,
                    scan, tid, tile):
    """3. number: ``unique_idx = base + rank`` gives each first occurrence its output and plan
    entry, and each scratch miss its copy destination: by claim position for the copier tiles,
    else in this tile's copy list. Returns the number of copies listed."""
    claim_unique, claim_dst, unique_token, unique_claim = work[4], work[5], work[6], work[7]
    copy_src, copy_dst = work[8], work[9]
    top_k, cap = out.shape[2], scratch_locs.shape[1]
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
                    plan[0][b, u] = host_src[r] if dst >= 0 else -1
                    plan[1][b, u] = dst if dst >= 0 else -1
            else:
                out[b, occ // top_k, occ % top_k] = -2 - u
            if copiers > 0:
                claim_dst[b, claim[r]] = dst
            elif dst >= 0:
                copies += 1
            u += 1
    num_copies = 0
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
    return num_copies


@cuda.jit(device=True, inline=True)
def arrive_dev(counters, b, tiles, committer):
    """Count this tile as arrived at request ``b``: 1 if it was the last one and so finishes the
    request, else 0 (always 0 with a committer tile, which finishes it instead)."""
    last = cuda.atomic.add(counters, (b, 1), 1) == tiles - 1
    return 1 if last and not committer else 0


@cuda.jit(device=True, inline=True)
def duplicates_tile_dev(work, state, out, b, rid, t, sigma, y, tiles, first, reps, base, num_first,
                        committer, copiers, claim, is_first, shared, tid, tile):
    """4. duplicates: publish NUMBERED. A tile holding later occurrences of missed tokens waits
    for NUMBERED of the earlier tiles and gives them their first occurrence's location; with
    copier tiles, the last tile waits too and indexes the request's misses (its SM, unlike
    theirs, reads nothing from the host). These arrive only after that, the others at once;
    ``shared[3]`` says whether this tile arrived last and so finishes the request (read it after
    a barrier)."""
    counters, flags, claim_unique = work[0], work[1], work[4]
    scratch_locs, metadata = state[2], state[4]
    top_k, cap = out.shape[2], scratch_locs.shape[1]
    publish_dev(flags, b, NUMBERED, y, 1, tid)
    dups = shared[4]
    indexer = copiers > 0 and y == tiles - 1
    if tid == 0 and dups == 0 and not indexer:
        shared[3] = arrive_dev(counters, b, tiles, committer)
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
            index_misses_dev(metadata, state[3], work[2], work[3], work[6], work[7], b, rid + 1,
                             t, sigma, 0, base + num_first, tid, tile)
        cuda.syncthreads()
        if tid == 0:
            cuda.threadfence()
            shared[3] = arrive_dev(counters, b, tiles, committer)
