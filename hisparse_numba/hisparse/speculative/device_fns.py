"""Device functions of the speculative swap kernel (``kernel.py``), each named after what it does.

The gather's: coherent loads between the blocks of one launch, the ordered scratch-table insert
and find (the device side of ``reference.table_insert_reference``), the per-occurrence
classification (the device side of ``reference.classify_reference``), the private claim set, and
the flags tiles publish and wait for. The commit's, in the order it calls them: admission, the
victims (union sampling, the approximate walk, the fallback; each beside its ``reference.py``
twin's name), applying a victim (evict, take the slot, promote), and the direct-overflow
locations. Lessons 01, 03, 04 and 08 run the kernel they make up.
"""

from __future__ import annotations

import numpy as np

from ...blockscan import block_exclusive_scan_dev
from ...device import cuda
from .hash import (KNUTH, MASK32, hash_erase_dev, hash_lookup_dev, knuth_hash_dev,
                         stage_item_dev, thread_range_dev)
from .state import (ADMIT_BIT, CLAIM_BIT, CLOCK_VICTIM_SAMPLES, COMPACT_POS_MASK, UNRESOLVED,
                          approximate_candidate_dev)

LANES = 32
MAX_THREADS = 1024              # threads per tile at most: the size of the kernel's scan array
HOLD_WORDS = 4                  # words per lane a copier's loader warp holds: items up to 1 KiB
EMPTY_KEY = -1                  # an empty cell of the private claim set
NO_OCCURRENCE = 0x7FFFFFFF      # claim_first of a cell no occurrence has claimed yet
PROPOSED = -0x80000000          # + unique_idx: a slot's epoch while misses propose it (approximate mode)
CLAIMED, COUNTED, NUMBERED = 0, 1, 2   # the stages a tile publishes (Workspace.flags)
# classify_dev's kinds of occurrence
INVALID, TAIL, HOT, MISS = 0, 1, 2, 3


@cuda.jit(device=True, inline=True)
def load_coherent_dev(array, index):
    """``array[index]`` as other blocks of this launch left it: an atomic add of zero, served by
    L2. A plain load may be served by this SM's L1, which other SMs' writes and atomics do not
    update."""
    return cuda.atomic.add(array, index, 0)


@cuda.jit(device=True, inline=True)
def table_insert_dev(metadata, row, t, sigma, token):
    """Lock-free ordered insert. A cell only grows during a launch, so a stale read is harmless:
    the CAS returns the true value and the loop goes on from it. At most ``t`` moves: a call
    inserts at most ``t`` tokens, so a free cell is always found within them; only a corrupted
    row (rejected by the value checks) could be full, and then the insert gives up instead of
    probing forever."""
    v = (sigma << 32) | token
    p = knuth_hash_dev(token) % t
    c = metadata[row, p]
    moves = 0
    while moves < t:
        if (c >> 32) != sigma or v > c:
            old = cuda.atomic.cas(metadata, (row, p), c, v)
            if old == c:
                if (c >> 32) != sigma:
                    return
                v = c
                p = (p + 1) % t
                moves += 1
                c = metadata[row, p]
            else:
                c = old
        elif c == v:
            return
        else:
            p = (p + 1) % t
            moves += 1
            c = metadata[row, p]


@cuda.jit(device=True, inline=True)
def table_find_dev(metadata, row, t, sigma, token):
    v = (sigma << 32) | token
    p = knuth_hash_dev(token) % t
    for _ in range(t):
        if load_coherent_dev(metadata, (row, p)) == v:
            return p
        p = (p + 1) % t
    return -1


@cuda.jit(device=True, inline=True)
def classify_dev(top_k_tokens, seq_lens, device_buffer_tokens, device_buffer_locs, host_cache_locs,
                 cache_index, b, rid, occ, top_k, steps, hot, tail, degraded):
    """Returns (kind, value, token): INVALID (also unbacked; value -1), TAIL (value = location),
    HOT (slot) or MISS (host location)."""
    s = occ // top_k
    tok = np.int64(top_k_tokens[b, s, occ - s * top_k])
    seq_len = np.int64(seq_lens[b * steps + s])
    if tok < 0 or tok >= seq_len:
        return INVALID, np.int64(-1), tok
    if tail > 0 and tok >= seq_len - tail:
        for c in range(hot, hot + tail):
            if device_buffer_tokens[rid, c] == tok and device_buffer_locs[rid, c] >= 0:
                return TAIL, np.int64(device_buffer_locs[rid, c]), tok
    slot = hash_lookup_dev(cache_index, rid, device_buffer_tokens, tok, hot, degraded)
    if slot >= 0:
        return HOT, np.int64(slot), tok
    src = host_cache_locs[rid, tok]
    if src >= 0:
        return MISS, src, tok
    return INVALID, np.int64(-1), tok


@cuda.jit(device=True, inline=True)
def claim_token_dev(claim_keys, b, token):
    """(position of ``token`` in row ``b`` of the private set ``claim_keys`` (linear probing, -1 =
    empty), whether this call inserted it). Unlike the ordered scratch table, a position never
    moves, so it names the token for the rest of the launch; exactly one occurrence of each
    missed token inserts it."""
    mask = claim_keys.shape[1] - 1
    p = knuth_hash_dev(token) & mask
    while True:
        k = claim_keys[b, p]
        if k == EMPTY_KEY:
            k = cuda.atomic.cas(claim_keys, (b, p), np.int32(EMPTY_KEY), np.int32(token))
            if k == EMPTY_KEY:
                return p, True
        if k == token:
            return p, False
        p = (p + 1) & mask


@cuda.jit(device=True, inline=True)
def publish_dev(flags, b, stage, tile_id, value, tid):
    """Make this tile's writes visible, then set ``flags[b, stage, tile_id] = value`` (> 0). The
    barrier orders every thread's writes before thread 0's fence, whose cumulativity makes them
    visible to the GPU before the flag: one fence, not one per thread (docs/speculative-swap-in.md,
    "Waits and fences")."""
    cuda.syncthreads()
    if tid == 0:
        cuda.threadfence()
        cuda.atomic.exch(flags, (b, stage, tile_id), np.int32(value))


@cuda.jit(device=True, inline=True)
def wait_for_tiles_dev(flags, b, stage, num_tiles, tid, num_threads):
    """Spin until tiles ``0 .. num_tiles - 1`` of row ``b`` have published ``stage``; returns this
    thread's share of the sum of ``value - 1`` over them. Only tiles with a smaller ticket are
    waited for, and they are running or done, so the wait always ends. Only the threads that saw
    a flag fence (acquire), before the barrier that hands what they saw to the block."""
    total = 0
    j = tid
    while j < num_tiles:
        v = cuda.atomic.add(flags, (b, stage, j), np.int32(0))
        while v == 0:
            v = cuda.atomic.add(flags, (b, stage, j), np.int32(0))
        total += v - 1
        j += num_threads
    if tid < num_tiles:
        cuda.threadfence()
    cuda.syncthreads()
    return total


@cuda.jit(device=True, inline=True)
def warp_wait_for_tiles_dev(flags, b, stage, num_tiles, lane, seen, slot):
    """wait_for_tiles_dev for one warp, without a block barrier (the tile's other warps are
    busy): lane ``j`` polls tiles ``j, j + 32, ...`` and counts each one it sees in ``seen[slot]``
    (shared, zero before); every lane returns once the count reaches ``num_tiles``."""
    j = lane
    while j < num_tiles:
        while cuda.atomic.add(flags, (b, stage, j), np.int32(0)) == 0:
            pass
        cuda.atomic.add(seen, slot, 1)
        j += LANES
    while cuda.atomic.add(seen, slot, 0) < num_tiles:
        pass
    cuda.threadfence()


@cuda.jit(device=True, inline=True)
def admit_claimed_dev(scratch_state, row, compact, num_scratch, budget, scan, tid, tile):
    """Admission (approximate mode): the first ``budget`` of the scratch misses ``0 ..
    num_scratch - 1`` that carry CLAIM_BIT, in unique_idx order, get ADMIT_BIT. The whole tile
    calls it."""
    u0, u1 = thread_range_dev(num_scratch, tid, tile)
    count = 0
    for u in range(u0, u1):
        if scratch_state[row, compact + u] & CLAIM_BIT:
            count += 1
    base, _ = block_exclusive_scan_dev(scan, count, tid, tile)
    for u in range(u0, u1):
        if scratch_state[row, compact + u] & CLAIM_BIT:
            if base < budget:
                scratch_state[row, compact + u] |= ADMIT_BIT
            base += 1
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, union_mode, compact,
                     known_loc, tid):
    """Whether miss ``u`` takes a hot slot (reference: ``needs_victim``). ``known_loc`` is
    ``scratch_locs[rid, tid]``, read by this thread before the commit began: with no more misses
    than threads, miss ``tid`` is the thread's only one, and the test needs no load after a wait.
    (Only promotion changes a scratch location, and it tests ``u`` before it promotes ``u``.)"""
    if u >= cap:
        return True
    loc = known_loc if u == tid else scratch_locs[rid, u]
    if loc < 0:
        return False
    return union_mode or (scratch_state[row, compact + u] & ADMIT_BIT) != 0


@cuda.jit(device=True, inline=True)
def clear_round_flag_dev(flag, tid):
    """``flag[1] = 0`` (no proposal or fallback yet in this round), seen by the whole tile."""
    if tid == 0:
        flag[1] = 0
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def union_victim_dev(cache_policy, row, u, num_misses, cursor, hot, e_now, emask):
    """Union mode: the oldest slot among miss ``u``'s samples that this call has not stamped (the
    first on a tie), or -1 (reference: ``union_victim_reference``; the sampled positions are
    ``union_sample_positions``)."""
    partition_size = (hot - 1 - u) // num_misses + 1
    sample_count = min(partition_size, CLOCK_VICTIM_SAMPLES)
    # Fixed trip counts, so that the loops unroll and both arrays live in registers: all the
    # loads are in flight at once. (A dynamic count leaves refs in local memory, and storing each
    # load's result there waits for it: the loads ran one after another, ~1 us each.) The samples
    # past sample_count repeat the last one, a harmless extra read. No division by a runtime
    # value: the reference's ``s * partition_size // sample_count`` is ``s`` when sample_count is
    # partition_size, else a division by the constant; and ``u + position * num_misses < hot``,
    # so the ring wraps with one subtraction when the cursor is below H.
    slots = cuda.local.array(CLOCK_VICTIM_SAMPLES, np.int64)
    refs = cuda.local.array(CLOCK_VICTIM_SAMPLES, np.int64)
    for sample in range(CLOCK_VICTIM_SAMPLES):
        s = min(sample, sample_count - 1)
        position = s if partition_size <= CLOCK_VICTIM_SAMPLES else \
            s * partition_size // CLOCK_VICTIM_SAMPLES
        slot = cursor + u + position * num_misses
        if slot >= hot:
            slot -= hot
            if slot >= hot:
                slot %= hot
        slots[sample] = slot
    for sample in range(CLOCK_VICTIM_SAMPLES):
        refs[sample] = load_coherent_dev(cache_policy, (row, slots[sample]))
    best = -1
    best_age = np.int64(-1)
    for sample in range(CLOCK_VICTIM_SAMPLES):
        if sample < sample_count and refs[sample] != e_now:
            age = (e_now - refs[sample]) & emask
            if age > best_age:
                best = slots[sample]
                best_age = age
    return best


@cuda.jit(device=True, inline=True)
def approximate_propose_dev(cache_policy, row, aux, i, u, num_misses, cap, hot, e_now, flag):
    """One round of miss ``u``'s walk (victim ordinal ``i``, standing at ``aux[i]``): step past
    the candidates stamped E and propose the first unstamped one (``PROPOSED + u`` into its epoch
    with atomic.min, so the smallest unique_idx wins; ``flag[1] = 1``), or end the walk
    (``aux[i] = -1``). The stride is ``reference.approximate_walk``'s."""
    stride = num_misses - cap if u >= cap else num_misses
    linear = np.int64(aux[i])
    while linear < hot and load_coherent_dev(
            cache_policy, (row, approximate_candidate_dev(linear, e_now, hot))) == e_now:
        linear += stride
    if linear < hot:
        aux[i] = linear
        cuda.atomic.min(cache_policy, (row, approximate_candidate_dev(linear, e_now, hot)),
                        np.int32(PROPOSED + u))
        flag[1] = 1
    else:
        aux[i] = -1


@cuda.jit(device=True, inline=True)
def fallback_victim_dev(cache_policy, row, u, cursor, hot, e_now):
    """Miss ``u``'s fallback: the first slot not stamped E in Knuth-hash order from
    ``cursor + u * KNUTH`` (mod 2^32, mod H), stamped E; -1 if none (reference:
    ``fallback_victim_reference``)."""
    start = ((cursor + u * KNUTH) & MASK32) % hot
    for a in range(hot):
        slot = ((start + a * KNUTH) & MASK32) % hot
        if load_coherent_dev(cache_policy, (row, slot)) != e_now:
            cache_policy[row, slot] = e_now
            return slot
    return -1


@cuda.jit(device=True, inline=True)
def fallback_victims_dev(cache_policy, row, victims, aux, flag, lo, hi, cursor, hot, e_now, tid):
    """Thread 0, when ``flag[1]`` says some miss needs one, gives each miss ``u`` in ``lo .. hi -
    1`` with ``aux[u] >= 0`` (its victim ordinal) its fallback victim, in unique_idx order."""
    if flag[1] != 0 and tid == 0:
        for u in range(lo, hi):
            if aux[u] >= 0:
                victims[aux[u]] = fallback_victim_dev(cache_policy, row, u, cursor, hot, e_now)


@cuda.jit(device=True, inline=True)
def evict_victim_dev(cache_index, device_buffer_tokens, device_buffer_locs, victims, i, rid):
    """Victim ordinal ``i`` evicts the token of its slot ``victims[i]`` from the hash; a slot
    without a location cannot take a miss (``victims[i] = -1``). The first part of applying a
    victim: a tile reads the hash and the slots only while it classifies, so the commit may run
    it before the tiles have numbered their misses."""
    v = np.int64(victims[i])
    if v >= 0:
        old_loc = device_buffer_locs[rid, v]        # both read at once: one latency
        old_tok = np.int64(device_buffer_tokens[rid, v])
        if old_loc < 0:
            victims[i] = -1
        elif old_tok >= 0:
            hash_erase_dev(cache_index, rid, old_tok, v)


@cuda.jit(device=True, inline=True)
def take_slot_dev(device_buffer_tokens, unique_token, victims, pend, tokens, i, u, b, t, rid):
    """Miss ``u``'s token enters its victim's slot ``victims[i]`` (if any), and item ``i`` of the
    hash insert is staged (stage_item_dev: ``pend[i]``, and ``tokens[i]`` for the first
    ``len(tokens)`` victims)."""
    v = np.int64(victims[i])
    tok = np.int64(-1)
    if v >= 0:
        tok = load_coherent_dev(unique_token, b * t + u)
        device_buffer_tokens[rid, v] = tok
    stage_item_dev(pend, tokens, i, v, tok)


@cuda.jit(device=True, inline=True)
def promote_victim_dev(device_buffer_locs, scratch_locs, scratch_state, metadata, victims, i, u,
                       rid, row, index, compact, cap, sigma):
    """Miss ``u`` takes the location of its victim ``victims[i]``: a scratch miss by zero-copy
    promotion (it swaps locations with the slot), a direct-overflow miss in place (its index entry
    names the slot's location, which the item is then copied to). A direct miss without a victim
    gets UNRESOLVED. Only once every tile has arrived: the tiles read the scratch locations."""
    v = np.int64(victims[i])
    if v >= 0 and u < cap:
        old_loc = device_buffer_locs[rid, v]
        device_buffer_locs[rid, v] = scratch_locs[rid, u]
        scratch_locs[rid, u] = old_loc
    elif u >= cap:
        p = scratch_state[row, compact + u] & COMPACT_POS_MASK
        low = device_buffer_locs[rid, v] if v >= 0 else UNRESOLVED
        metadata[row, index + p] = (sigma << 32) | low


@cuda.jit(device=True, inline=True)
def direct_locations_dev(out, scratch_state, metadata, b, row, index, compact, t, top_k, tid, tile):
    """Direct overflow: each output ``-2 - u`` becomes the location miss ``u`` was copied to (its
    index entry), or -1 when it found no victim."""
    occ = tid
    while occ < t:
        s = occ // top_k
        x = np.int64(load_coherent_dev(out, (b, s, occ - s * top_k)))
        if x <= -2:
            p = scratch_state[row, compact + (-2 - x)] & COMPACT_POS_MASK
            low = metadata[row, index + p] & MASK32
            out[b, s, occ - s * top_k] = -1 if low == UNRESOLVED else low
        occ += tile
