"""Version 1, the plain rung: one block per request runs the reference's stages in order.

Grid ``batch`` x ``tile_threads(T)`` threads (up to 1024 on a GPU, 32 in the simulator), a barrier
after every stage. Each stage has the name of a stage of ``reference.request_reference``: read
them side by side. Shared memory: each miss's victim and walk position (``MAX_OCCURRENCES`` int16
each), the scan. Global ``PlainWorkspace`` rows: each occurrence's table position, each table
position's first occurrence, the copy list. Every choice the reference makes in an order
(numbering, admission, fallbacks, hash rounds) is a block scan or a loop in that order here.
Lessons 01, 03, 04 and 08 show this rung first.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ... import device, value_flags
from ...arguments import derived_argument, int64_view
from ...blockscan import block_exclusive_scan_dev
from ...device import cuda, jit_kernel
from ...itemcopy import copy_item_dev
from ...value_flags import gate_closed_dev
from ..limits import MAX_OCCURRENCES
from ..miss_plan import placeholder_plan
from .device_fns import (HOT, LANES, MAX_THREADS, MISS, NO_OCCURRENCE, PROPOSED, admit_claimed_dev,
                         approximate_propose_dev, classify_dev, direct_locations_dev,
                         fallback_victim_dev, needs_victim_dev, table_find_dev, table_insert_dev,
                         union_victim_dev)
from .hash import MASK32, hash_erase_dev, hash_insert_dev, thread_range_dev
from .state import (CLAIM_BIT, COMMIT_CHUNK, COMPACT_POS_MASK, COUNT_GEN, COUNT_LAST, COUNT_UNION, COUNT_WORK,
                    UNRESOLVED, approximate_candidate_dev, clock_bits_dev, next_epoch_dev,
                    next_sigma_dev, pack_clock_dev, pack_generation_dev)

DEGRADED, ROUND, UNION_HITS = 0, 1, 2      # the block's shared flags


@cuda.jit(device=True, inline=True)
def needs_victim(scratch_state, scratch_locs, rid, u, union_mode, t):
    """reference.needs_victim (no location read ahead: ``tid = -1``)."""
    return needs_victim_dev(scratch_state, scratch_locs, rid, rid + 1, u, scratch_locs.shape[1],
                            union_mode, 4 * t, 0, -1)


@cuda.jit(device=True, inline=True)
def union_victims_dev(cache_policy, scratch_state, scratch_locs, victims, rid, m, t, cursor, e_now,
                      emask, tid, nthreads):
    """Union mode, COMMIT_CHUNK misses at a time: sample, stamp, then thread 0's fallbacks."""
    hot, row = cache_policy.shape[1], rid + 1
    for lo in range(0, m, COMMIT_CHUNK):
        hi = min(lo + COMMIT_CHUNK, m)
        for u in range(lo + tid, hi, nthreads):
            if needs_victim(scratch_state, scratch_locs, rid, u, True, t):
                victims[u] = union_victim_dev(cache_policy, row, u, m, cursor, hot, e_now, emask)
        cuda.syncthreads()
        for u in range(lo + tid, hi, nthreads):
            if victims[u] >= 0:
                cache_policy[row, victims[u]] = e_now
        cuda.syncthreads()
        if tid == 0:
            for u in range(lo, hi):
                if victims[u] < 0 and needs_victim(scratch_state, scratch_locs, rid, u, True, t):
                    victims[u] = fallback_victim_dev(cache_policy, row, u, cursor, hot, e_now)
        cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def approximate_victims_dev(cache_policy, scratch_state, scratch_locs, victims, walk, flags, rid,
                            m, t, cursor, e_now, tid, nthreads):
    """Approximate mode: rounds of proposals (the smallest unique_idx wins a slot, atomic.min of
    PROPOSED + u), then thread 0's fallbacks in unique_idx order."""
    hot, row, cap = cache_policy.shape[1], rid + 1, scratch_locs.shape[1]
    for u in range(tid, m, nthreads):
        start = u - cap if u >= cap else u            # reference.approximate_walk
        want = needs_victim(scratch_state, scratch_locs, rid, u, False, t) and start < hot
        walk[u] = start if want else -1
    while True:
        cuda.syncthreads()
        if tid == 0:
            flags[ROUND] = 0
        cuda.syncthreads()
        for u in range(tid, m, nthreads):
            if victims[u] < 0 and walk[u] >= 0:
                approximate_propose_dev(cache_policy, row, walk, u, u, m, cap, hot, e_now, flags)
        cuda.syncthreads()
        if flags[ROUND] == 0:
            break
        for u in range(tid, m, nthreads):
            if victims[u] < 0 and walk[u] >= 0:
                slot = approximate_candidate_dev(np.int64(walk[u]), e_now, hot)
                if cache_policy[row, slot] == PROPOSED + u:
                    victims[u] = slot
                    cache_policy[row, slot] = e_now
    if tid == 0:
        for u in range(m):
            if victims[u] < 0 and needs_victim(scratch_state, scratch_locs, rid, u, False, t):
                victims[u] = fallback_victim_dev(cache_policy, row, u, cursor, hot, e_now)
    cuda.syncthreads()



@cuda.jit(device=True, inline=True)
def admission_stage_dev(tokens, seq_lens, dbt, dbl, hcl, cache_index, cache_policy, scratch_state,
                        metadata, pos, scan, b, rid, t, m, cap, union_hits, e_now, degraded, tid,
                        nthreads):
    """Approximate mode: clear the epochs (no overflow), re-stamp the last step's hits, claim its
    scratch misses, admit the first ``budget`` of them in unique_idx order (a block scan)."""
    steps, top_k, hot, row = tokens.shape[1], tokens.shape[2], cache_policy.shape[1], rid + 1
    if m <= cap:
        for s in range(tid, hot, nthreads):
            cache_policy[row, s] = 0
        cuda.syncthreads()
    for occ in range((steps - 1) * top_k + tid, t, nthreads):   # still classified as before
        kind, value, _ = classify_dev(tokens, seq_lens, dbt, dbl, hcl, cache_index, b, rid, occ,
                                      top_k, steps, hot, dbt.shape[1] - hot, degraded)
        if kind == HOT:
            cache_policy[row, value] = e_now
        elif kind == MISS:
            u = metadata[row, t + pos[b, occ]] & MASK32
            if u < cap:
                cuda.atomic.or_(scratch_state, (row, 4 * t + u), np.int32(CLAIM_BIT))
    cuda.syncthreads()
    budget = hot if m <= cap else max(0, hot - union_hits - (m - cap))
    admit_claimed_dev(scratch_state, row, 4 * t, min(m, cap), budget, scan, tid, nthreads)


@cuda.jit(device=True, inline=True)
def evictions_stage_dev(cache_index, dbt, dbl, hcl, scratch_locs, scratch_state, metadata, victims,
                        copy_src, copy_dst, b, rid, m, t, sigma, tid, nthreads):
    """Each victim with a location: its token leaves the hash, the miss's token takes the slot,
    then zero-copy promotion, or a direct-overflow miss is listed to copy into the slot's
    location. A victim without one becomes -1; a direct-overflow miss then is UNRESOLVED."""
    row, cap = rid + 1, scratch_locs.shape[1]
    for u in range(tid, m, nthreads):
        v = np.int64(victims[u])
        p = scratch_state[row, 4 * t + u] & COMPACT_POS_MASK
        if v >= 0 and dbl[rid, v] >= 0:
            old_loc, old_tok = dbl[rid, v], np.int64(dbt[rid, v])
            if old_tok >= 0:
                hash_erase_dev(cache_index, rid, old_tok, v)
            tok = metadata[row, p] & MASK32
            dbt[rid, v] = tok
            if u < cap:
                dbl[rid, v] = scratch_locs[rid, u]
                scratch_locs[rid, u] = old_loc
            else:
                metadata[row, t + p] = (sigma << 32) | old_loc
                copy_src[b, u] = hcl[rid, tok]
                copy_dst[b, u] = old_loc
        else:
            victims[u] = -1
            if u >= cap:
                metadata[row, t + p] = (sigma << 32) | UNRESOLVED


@jit_kernel(max_threads=MAX_THREADS)
def plain_kernel(tokens, seq_lens, dbt, dbl, hcl, host_words, dev_words, out, req_pool_indices,
                 num_real_reqs, cache_index, cache_policy, scratch_locs, scratch_state, metadata,
                 miss_src, miss_dst, miss_count, pos, first, copy_src, copy_dst, words_per_item,
                 record, gate):
    b, tid, nthreads = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
    steps, top_k, hot = tokens.shape[1], tokens.shape[2], cache_policy.shape[1]
    t, n, cap = steps * top_k, scratch_locs.shape[0], scratch_locs.shape[1]
    if gate_closed_dev(gate):       # the call's value check rejected it
        return
    if b >= num_real_reqs[0]:       # a padded row
        for occ in range(tid, t, nthreads):
            out[b, occ // top_k, occ % top_k] = 0
        if record and tid == 0:
            miss_count[b] = 0
        return
    victims = cuda.shared.array(MAX_OCCURRENCES, np.int16)   # per unique miss: its slot, -1 none
    walk = cuda.shared.array(MAX_OCCURRENCES, np.int16)  # approximate walks, then the hash's items
    scan = cuda.shared.array(MAX_THREADS, np.int32)
    flags = cuda.shared.array(3, np.int32)               # DEGRADED, ROUND, UNION_HITS
    no_cells = cuda.shared.array(1, np.int32)            # no settle table: the hash rounds race
    rid = req_pool_indices[b]
    row = rid + 1
    cbits, ebits = clock_bits_dev(hot)
    packed = np.int64(cache_policy[0, rid])
    e_now = next_epoch_dev(packed, cbits, ebits)
    cursor = (packed & MASK32) & ((1 << cbits) - 1)
    gen = np.int64(scratch_state[0, COUNT_GEN * n + rid])
    degraded, sigma = gen < 0, next_sigma_dev(gen)
    if tid == 0:
        flags[DEGRADED] = 0
        flags[UNION_HITS] = 0
    cuda.syncthreads()
    # classify: outputs of invalid, tail and hot occurrences, stamps (the distinct ones counted),
    # scratch-table inserts of the missed tokens (pos = 0 marks a miss until count)
    for occ in range(tid, t, nthreads):
        first[b, occ] = NO_OCCURRENCE
        pos[b, occ] = -1
        kind, value, tok = classify_dev(tokens, seq_lens, dbt, dbl, hcl, cache_index, b, rid, occ,
                                        top_k, steps, hot, dbt.shape[1] - hot, degraded)
        if kind == MISS:
            table_insert_dev(metadata, row, t, sigma, tok)
            pos[b, occ] = 0
        else:
            if kind == HOT:
                if cuda.atomic.exch(cache_policy, (row, value), np.int32(e_now)) != e_now:
                    cuda.atomic.add(flags, UNION_HITS, 1)
                value = dbl[rid, value]
            out[b, occ // top_k, occ % top_k] = value
    cuda.syncthreads()
    # count: each miss's table position; a token's first occurrence is the smallest one
    for occ in range(tid, t, nthreads):
        if pos[b, occ] >= 0:
            p = table_find_dev(metadata, row, t, sigma, tokens[b, occ // top_k, occ % top_k])
            pos[b, occ] = p
            cuda.atomic.min(first, (b, p), occ)
    cuda.syncthreads()
    o0, o1 = thread_range_dev(t, tid, nthreads)      # consecutive occurrences: scans keep order
    firsts = 0
    for occ in range(o0, o1):
        if pos[b, occ] >= 0 and first[b, pos[b, occ]] == occ:
            firsts += 1
    u, m = block_exclusive_scan_dev(scan, firsts, tid, nthreads)
    # number: unique_idx u of each first occurrence: index and compact entries, its output
    # (scratch location, or -2 - u for direct overflow) and its copy to the scratch location
    for occ in range(o0, o1):
        p = pos[b, occ]
        if p >= 0 and first[b, p] == occ:
            metadata[row, t + p] = (sigma << 32) | u
            scratch_state[row, 4 * t + u] = p
            loc = scratch_locs[rid, u] if u < cap else -2 - u
            out[b, occ // top_k, occ % top_k] = loc
            copied = u < cap and loc >= 0
            copy_src[b, u] = hcl[rid, tokens[b, occ // top_k, occ % top_k]] if copied else -1
            copy_dst[b, u] = loc if copied else -1
            u += 1
    cuda.syncthreads()
    # duplicates: a later occurrence outputs its first occurrence's location
    for occ in range(tid, t, nthreads):
        f = first[b, pos[b, occ]] if pos[b, occ] >= 0 else occ
        if f != occ:
            out[b, occ // top_k, occ % top_k] = out[b, f // top_k, f % top_k]
    # admission: the mode; in approximate mode, the claims and admissions
    union_hits = flags[UNION_HITS]
    union_mode = m + union_hits <= hot
    if not union_mode:
        admission_stage_dev(tokens, seq_lens, dbt, dbl, hcl, cache_index, cache_policy,
                            scratch_state, metadata, pos, scan, b, rid, t, m, cap, union_hits,
                            e_now, degraded, tid, nthreads)
    # victims: a slot not stamped this call for each miss that needs one
    for u in range(tid, m, nthreads):
        victims[u] = -1
    cuda.syncthreads()
    if union_mode:
        union_victims_dev(cache_policy, scratch_state, scratch_locs, victims, rid, m, t, cursor,
                          e_now, (1 << ebits) - 1, tid, nthreads)
    else:
        approximate_victims_dev(cache_policy, scratch_state, scratch_locs, victims, walk, flags,
                                rid, m, t, cursor, e_now, tid, nthreads)
    # evictions
    evictions_stage_dev(cache_index, dbt, dbl, hcl, scratch_locs, scratch_state, metadata, victims,
                        copy_src, copy_dst, b, rid, m, t, sigma, tid, nthreads)
    cuda.syncthreads()
    # hash: the new tokens of the slots that took a miss, in unique_idx order (ends in a barrier)
    hash_insert_dev(cache_index, rid, dbt, victims, m, walk, flags, scan, no_cells, tid, nthreads,
                    False)
    # finish: direct-overflow outputs, the plan, the counters and the CLOCK state
    if m > cap:
        direct_locations_dev(out, scratch_state, metadata, b, row, t, 4 * t, t, top_k, tid,
                             nthreads)
    for u in range(tid, m, nthreads):
        if record:
            miss_src[b, u] = copy_src[b, u]
            miss_dst[b, u] = copy_dst[b, u]
    if tid == 0:
        scratch_state[0, COUNT_LAST * n + rid] = m
        scratch_state[0, COUNT_WORK * n + rid] = 0
        scratch_state[0, COUNT_UNION * n + rid] = 0
        scratch_state[0, COUNT_GEN * n + rid] = pack_generation_dev(sigma,
                                                                    degraded or flags[DEGRADED] != 0)
        cache_policy[0, rid] = pack_clock_dev(e_now, (cursor + min(m, np.int64(hot))) % hot, cbits)
        if record:
            miss_count[b] = m
    # copy: one warp per copied miss, host -> device
    for u in range(tid // LANES, m, nthreads // LANES):
        if copy_dst[b, u] >= 0:
            copy_item_dev(host_words, copy_src[b, u], dev_words, copy_dst[b, u], words_per_item,
                          tid % LANES, LANES)


class PlainWorkspace(NamedTuple):
    """The plain kernel's global rows, ``[batch, T]`` each; a launch writes all it reads."""

    pos: object         # int32, per occurrence: a miss's table position, -1 for the others
    first: object       # int32, per table position: its token's first occurrence
    copy_src: object    # int64, per unique miss: host location (-1: not copied)
    copy_dst: object    # int32, per unique miss: device location (-1: not copied)


@functools.lru_cache(maxsize=8)
def workspace(batch: int, num_occurrences: int) -> PlainWorkspace:
    xp, shape = device.xp, (batch, num_occurrences)
    return PlainWorkspace(xp.empty(shape, dtype=xp.int32), xp.empty(shape, dtype=xp.int32),
                          xp.empty(shape, dtype=xp.int64), xp.empty(shape, dtype=xp.int32))


def launch(call) -> None:
    """Launch a checked ``SpecCall`` (``launch.launch_unchecked(call, version=1)``)."""
    from .launch import tile_threads
    if call.batch == 0:
        return
    t = call.steps * call.top_k
    plan = (call.miss_src, call.miss_dst, call.miss_count) if call.record else placeholder_plan()
    state = call.state
    device.launch(plain_kernel, call.batch, tile_threads(t), call.top_k_tokens, call.seq_lens,
                  call.device_buffer_tokens, call.device_buffer_locs, call.host_cache_locs,
                  derived_argument("words", call.host_cache, device.byte_words),
                  derived_argument("words", call.device_buffer, device.byte_words),
                  call.top_k_device_locs, call.req_pool_indices, call.num_real_reqs,
                  state.cache_index, state.cache_policy, state.scratch_locs, state.scratch_state,
                  derived_argument("int64", state.scratch_state, int64_view), *plan,
                  *workspace(call.batch, t), call.item_size_bytes // 8, int(call.record),
                  value_flags.open_gate() if call.gate is None else call.gate)
