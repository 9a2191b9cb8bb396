"""The commit stages of version 1, the plain rung (``v1_plain.py``): admission, victims,
evictions and finish, each by the request's whole block, each named and ordered as its stage in
``reference.py``. Misses are shared out ``u = tid, tid + threads, ...``; what the reference does in
unique_idx order (admission, the fallbacks, the settling of a contested slot) is a block scan,
one thread's loop, or atomic.min of the unique_idx. Lessons 01, 03, 04 and 08 show this rung.
"""

from __future__ import annotations

import numpy as np

from ...device import cuda
from .device_fns import (HOT, MISS, PROPOSED, admit_claimed_dev, approximate_propose_dev,
                         classify_dev, direct_locations_dev, fallback_victim_dev, union_victim_dev)
from .hash import MASK32, hash_erase_dev
from .state import (ADMIT_BIT, CLAIM_BIT, COMMIT_CHUNK, COMPACT_POS_MASK, COUNT_GEN, COUNT_LAST,
                    COUNT_UNION, COUNT_WORK, UNRESOLVED, approximate_candidate_dev, pack_clock_dev,
                    pack_generation_dev)

DEGRADED, ROUND, UNION_HITS = 0, 1, 2      # the block's shared flags (v1_plain.plain_kernel)


@cuda.jit(device=True, inline=True)
def needs_victim_dev(scratch_state, scratch_locs, rid, u, union_mode, t):
    """reference.needs_victim: every direct-overflow miss; a scratch miss with a location in union
    mode, or admitted in approximate mode (compact entries from column ``4 * t``)."""
    if u >= scratch_locs.shape[1]:
        return True
    return scratch_locs[rid, u] >= 0 and (union_mode or
                                         (scratch_state[rid + 1, 4 * t + u] & ADMIT_BIT) != 0)


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
def union_victims_dev(cache_policy, scratch_state, scratch_locs, victims, rid, m, t, cursor,
                      e_now, emask, tid, nthreads):
    """Union mode, COMMIT_CHUNK misses at a time: sample, stamp, then thread 0's fallbacks."""
    hot, row = cache_policy.shape[1], rid + 1
    for lo in range(0, m, COMMIT_CHUNK):
        hi = min(lo + COMMIT_CHUNK, m)
        for u in range(lo + tid, hi, nthreads):
            if needs_victim_dev(scratch_state, scratch_locs, rid, u, True, t):
                victims[u] = union_victim_dev(cache_policy, row, u, m, cursor, hot, e_now, emask)
        cuda.syncthreads()
        for u in range(lo + tid, hi, nthreads):
            if victims[u] >= 0:
                cache_policy[row, victims[u]] = e_now
        cuda.syncthreads()
        if tid == 0:
            for u in range(lo, hi):
                if victims[u] < 0 and needs_victim_dev(scratch_state, scratch_locs, rid, u, True,
                                                       t):
                    victims[u] = fallback_victim_dev(cache_policy, row, u, cursor, hot, e_now)
        cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def approximate_victims_dev(cache_policy, scratch_state, scratch_locs, victims, walk, flags, rid,
                            m, t, cursor, e_now, tid, nthreads):
    """Approximate mode: rounds of proposals along the walks (``walk[u]``: where miss u stands,
    -1 ended; the smallest unique_idx wins a slot: atomic.min of PROPOSED + u into its epoch),
    then thread 0's fallbacks in unique_idx order."""
    hot, row, cap = cache_policy.shape[1], rid + 1, scratch_locs.shape[1]
    for u in range(tid, m, nthreads):
        start = u - cap if u >= cap else u            # reference.approximate_walk
        want = needs_victim_dev(scratch_state, scratch_locs, rid, u, False, t) and start < hot
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
            if victims[u] < 0 and needs_victim_dev(scratch_state, scratch_locs, rid, u, False, t):
                victims[u] = fallback_victim_dev(cache_policy, row, u, cursor, hot, e_now)


@cuda.jit(device=True, inline=True)
def victims_stage_dev(cache_policy, scratch_state, scratch_locs, victims, walk, flags, rid, m, t,
                      union_mode, cursor, e_now, emask, tid, nthreads):
    """``victims[u]``: a hot slot not stamped this call for each miss that needs one, else -1."""
    for u in range(tid, m, nthreads):
        victims[u] = -1
    cuda.syncthreads()
    if union_mode:
        union_victims_dev(cache_policy, scratch_state, scratch_locs, victims, rid, m, t, cursor,
                          e_now, emask, tid, nthreads)
    else:
        approximate_victims_dev(cache_policy, scratch_state, scratch_locs, victims, walk, flags,
                                rid, m, t, cursor, e_now, tid, nthreads)
    cuda.syncthreads()


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
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def finish_stage_dev(out, cache_policy, scratch_state, metadata, miss_src, miss_dst, miss_count,
                     copy_src, copy_dst, b, rid, n, m, t, cap, sigma, e_now, cursor, cbits,
                     degraded, record, tid, nthreads):
    """Direct-overflow outputs, the plan (the copy list), the counters and the CLOCK state."""
    hot, top_k = cache_policy.shape[1], out.shape[2]
    if m > cap:
        direct_locations_dev(out, scratch_state, metadata, b, rid + 1, t, 4 * t, t, top_k, tid,
                             nthreads)
    for u in range(tid, m if record else 0, nthreads):
        miss_src[b, u] = copy_src[b, u]
        miss_dst[b, u] = copy_dst[b, u]
    if tid == 0:
        scratch_state[0, COUNT_LAST * n + rid] = m
        scratch_state[0, COUNT_WORK * n + rid] = 0
        scratch_state[0, COUNT_UNION * n + rid] = 0
        scratch_state[0, COUNT_GEN * n + rid] = pack_generation_dev(sigma, degraded)
        cache_policy[0, rid] = pack_clock_dev(e_now, (cursor + min(m, np.int64(hot))) % hot, cbits)
        if record:
            miss_count[b] = m
