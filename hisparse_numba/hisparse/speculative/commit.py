"""The commit's stages of the speculative swap kernel (``kernel.py``), each run by one whole tile
(the committer, or the last tile to arrive) in the order ``finish_request_dev`` calls them:
counting the misses that need a victim, the union-mode victims, admission and the
approximate-mode victims, the index of the scratch table, and the victims' evictions. Each
follows the commit of ``reference.request_reference`` with the same names; the single-miss steps
they loop over are in ``device_fns.py``. Lessons 01, 03, 04 and 08 run the kernel they are part
of.
"""

from __future__ import annotations

import numpy as np

from ...blockscan import block_exclusive_scan_dev
from ...device import cuda
from .hash import MASK32, thread_range_dev
from .state import CLAIM_BIT, COMMIT_CHUNK, approximate_candidate_dev
from .device_fns import (EMPTY_KEY, HOT, MISS, NO_OCCURRENCE, PROPOSED, admit_claimed_dev,
                         approximate_propose_dev, classify_dev, clear_round_flag_dev,
                         evict_victim_dev, fallback_victims_dev, load_coherent_dev,
                         needs_victim_dev, table_find_dev, union_victim_dev)


@cuda.jit(device=True, inline=True)
def warm_l1_dev(cache_index, device_buffer_tokens, device_buffer_locs, rid, hot, tid, tile):
    """Read one word of every 32-byte sector of request ``rid``'s hash banks and of its hot slots'
    tokens and locations, so that they sit in this SM's L1 cache when the commit needs them;
    returns the words' xor, which the caller stores so that the loads are kept. Only the commit
    writes these arrays during a launch (the tiles read them), so the cached copies stay right
    (docs/speculative-swap-in.md, "Where the time goes at batch 1")."""
    seen = np.int64(0)
    words = cache_index.shape[2]
    for bank in range(2):
        j = 4 * tid
        while j < words:
            seen ^= cache_index[rid, bank, j]
            j += 4 * tile
    j = 8 * tid
    while j < hot:
        seen ^= np.int64(device_buffer_tokens[rid, j]) ^ np.int64(device_buffer_locs[rid, j])
        j += 8 * tile
    return seen


@cuda.jit(device=True, inline=True)
def count_victims_dev(scratch_state, scratch_locs, rid, row, num_misses, cap, union_mode,
                      compact, known_loc, scan, tid, tile):
    """(first, last + 1) of this thread's misses, and (its first victim ordinal, number of
    victims) over the misses that need a victim (``known_loc``: see needs_victim_dev)."""
    u0, u1 = thread_range_dev(num_misses, tid, tile)
    count = 0
    for u in range(u0, u1):
        if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, union_mode, compact,
                            known_loc, tid):
            count += 1
    base, num_victims = block_exclusive_scan_dev(scan, count, tid, tile)
    return u0, u1, base, num_victims


@cuda.jit(device=True, inline=True)
def union_victims_dev(cache_policy, scratch_state, scratch_locs, rid, row, num_misses, cap,
                      compact, cursor, hot, e_now, emask, victims, aux, flag, u0, u1, base,
                      known_loc, tid):
    """Union mode: sampled CLOCK, COMMIT_CHUNK misses at a time as in sglang's commit block:
    miss u samples its own partition of the ring (disjoint between misses); then thread 0
    runs the chunk's fallbacks (aux[u] = victim ordinal, -1 when u has its victim), whose
    stamps the next chunk's samples see. Every miss samples once before the first chunk, so
    that all the loads are in flight together: a chunk's own stamps fall in its own
    partitions, so only a fallback (which may stamp any slot) makes the later chunks sample
    again. When no sample came back empty there is no fallback at all, and every miss stamps
    its victim at once."""
    i = base
    empty = 0
    for u in range(u0, u1):
        if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, True, compact,
                            known_loc, tid):
            victims[i] = union_victim_dev(cache_policy, row, u, num_misses, cursor, hot, e_now,
                                          emask)
            if victims[i] < 0:
                empty = 1
            i += 1
    if not cuda.syncthreads_or(empty):
        for j in range(base, i):
            cache_policy[row, victims[j]] = e_now
        return
    resample = False         # a fallback has stamped: the samples taken above may be stale
    lo = np.int64(0)
    while lo < num_misses:
        hi = min(lo + COMMIT_CHUNK, num_misses)
        clear_round_flag_dev(flag, tid)
        i = base
        for u in range(u0, u1):
            if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, True, compact,
                                known_loc, tid):
                if u >= lo and u < hi:
                    best = np.int64(victims[i])
                    if resample:
                        best = union_victim_dev(cache_policy, row, u, num_misses, cursor, hot,
                                                e_now, emask)
                    victims[i] = best
                    aux[u] = -1
                    if best >= 0:
                        cache_policy[row, best] = e_now
                    else:
                        aux[u] = i
                        flag[1] = 1
                i += 1
            elif u >= lo and u < hi:
                aux[u] = -1
        cuda.syncthreads()
        resample = resample or flag[1] != 0
        fallback_victims_dev(cache_policy, row, victims, aux, flag, lo, hi, cursor, hot, e_now,
                             tid)
        cuda.syncthreads()
        lo = hi


@cuda.jit(device=True, inline=True)
def approximate_victims_dev(cache_policy, scratch_state, scratch_locs, rid, row, num_misses,
                            cap, compact, cursor, hot, e_now, victims, aux, flag, u0, u1, base,
                            t, known_loc, tid):
    """Approximate mode: walks in rounds. aux[i] is where miss i's walk stands (-1: ended). A
    proposal writes PROPOSED + unique_idx into the slot's epoch with atomic.min, so the
    smallest unique_idx wins; the winner then stamps E. Then the fallback: thread 0 probes
    for the misses whose walk ended, in unique_idx order (aux[u] = victim ordinal, -1 when u
    needs none)."""
    i = base
    for u in range(u0, u1):
        if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, False, compact,
                            known_loc, tid):
            victims[i] = -1
            linear = u - cap if u >= cap else u     # reference: approximate_walk
            aux[i] = linear if linear < hot else -1
            i += 1
    for _ in range(t + 1):       # every round settles a miss or ends with no proposal
        cuda.syncthreads()
        clear_round_flag_dev(flag, tid)
        i = base
        for u in range(u0, u1):
            if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, False, compact,
                                known_loc, tid):
                if victims[i] < 0 and aux[i] >= 0:
                    approximate_propose_dev(cache_policy, row, aux, i, u, num_misses, cap,
                                            hot, e_now, flag)
                i += 1
        cuda.syncthreads()
        if flag[1] == 0:
            break
        i = base
        for u in range(u0, u1):
            if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, False, compact,
                                known_loc, tid):
                if victims[i] < 0 and aux[i] >= 0:
                    slot = approximate_candidate_dev(np.int64(aux[i]), e_now, hot)
                    if load_coherent_dev(cache_policy, (row, slot)) == PROPOSED + u:
                        victims[i] = slot
                        cache_policy[row, slot] = e_now
                i += 1
    cuda.syncthreads()
    clear_round_flag_dev(flag, tid)
    i = base
    for u in range(u0, u1):
        aux[u] = -1
        if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, False, compact,
                            known_loc, tid):
            if victims[i] < 0:
                aux[u] = i
                flag[1] = 1
            i += 1
    cuda.syncthreads()
    fallback_victims_dev(cache_policy, row, victims, aux, flag, 0, num_misses, cursor, hot,
                         e_now, tid)
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def admit_dev(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
              seq_lens, cache_index, cache_policy, scratch_state, metadata, b, rid, row, t,
              sigma, e_now, num_misses, union_hits, cap, tail, degraded, scan, tid, tile):
    """Approximate mode: clear the reference epochs (without overflow), re-stamp the last
    step's hot hits, claim its scratch misses and admit the first ``budget`` of them."""
    steps, top_k = top_k_tokens.shape[1], top_k_tokens.shape[2]
    hot = cache_policy.shape[1]
    index, compact = t, 4 * t
    overflow = num_misses > cap
    if not overflow:
        i = tid
        while i < hot:
            cache_policy[row, i] = 0
            i += tile
        cuda.syncthreads()
    k = tid
    while k < top_k:
        kind, val, tok = classify_dev(top_k_tokens, seq_lens, device_buffer_tokens,
                                      device_buffer_locs, host_cache_locs, cache_index, b, rid,
                                      (steps - 1) * top_k + k, top_k, steps, hot, tail,
                                      degraded)
        if kind == HOT:
            cache_policy[row, val] = e_now
        elif kind == MISS:
            p = table_find_dev(metadata, row, t, sigma, tok)
            u = metadata[row, index + p] & MASK32
            if u < cap:
                cuda.atomic.or_(scratch_state, (row, compact + u), np.int32(CLAIM_BIT))
        k += tile
    cuda.syncthreads()
    budget = np.int64(hot)
    if overflow:
        budget = max(np.int64(0), hot - union_hits - (num_misses - cap))
    admit_claimed_dev(scratch_state, row, compact, min(num_misses, cap), budget, scan, tid,
                      tile)


@cuda.jit(device=True, inline=True)
def index_misses_dev(metadata, scratch_state, claim_keys, claim_first, unique_token,
                     unique_claim, b, row, t, sigma, lo, hi, tid, threads):
    """Index the scratch table by unique_idx (index and compact entries) and empty the
    request's claim set, for the misses ``lo .. hi - 1``."""
    index, compact = t, 4 * t
    u = lo + tid
    while u < hi:
        token = load_coherent_dev(unique_token, b * t + u)
        c = load_coherent_dev(unique_claim, b * t + u)
        p = table_find_dev(metadata, row, t, sigma, token)
        metadata[row, index + p] = (sigma << 32) | u
        scratch_state[row, compact + u] = p
        claim_keys[b, c] = EMPTY_KEY
        claim_first[b, c] = NO_OCCURRENCE
        u += threads


@cuda.jit(device=True, inline=True)
def evict_victims_dev(cache_index, device_buffer_tokens, device_buffer_locs, scratch_state,
                      scratch_locs, victims, rid, row, cap, union_mode, compact, u0, u1, base,
                      known_loc, tid):
    """evict_victim_dev for this thread's misses that need a victim."""
    i = base
    for u in range(u0, u1):
        if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, union_mode, compact,
                            known_loc, tid):
            evict_victim_dev(cache_index, device_buffer_tokens, device_buffer_locs, victims, i,
                             rid)
            i += 1
