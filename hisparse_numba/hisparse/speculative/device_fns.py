"""Device functions of the speculative swap kernel (``kernel.py``), each named after what it does.

Coherent loads between the blocks of one launch, the ordered scratch-table insert and find (the
device side of ``reference.table_insert_reference``), the per-occurrence classification (the device
side of ``reference.classify_reference``), the private claim set, and the flags tiles publish and
wait for, and the commit's victim helpers. Lessons 01, 03, 04 and 08 run the kernel they make up.
"""

from __future__ import annotations

import numpy as np

from ...device import cuda
from ..spec_hash import KNUTH, MASK32, hash_lookup_dev, knuth_hash_dev
from ..spec_state import ADMIT_BIT

LANES = 32
MAX_THREADS = 1024              # threads per tile at most: the size of the kernel's scan array
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
    """Position of ``token`` in row ``b`` of the private set ``claim_keys`` (linear probing, -1 =
    empty), inserting it if absent. Unlike the ordered scratch table, a position never moves, so it
    names the token for the rest of the launch."""
    mask = claim_keys.shape[1] - 1
    p = knuth_hash_dev(token) & mask
    while True:
        k = claim_keys[b, p]
        if k == EMPTY_KEY:
            k = cuda.atomic.cas(claim_keys, (b, p), np.int32(EMPTY_KEY), np.int32(token))
            if k == EMPTY_KEY:
                return p
        if k == token:
            return p
        p = (p + 1) & mask


@cuda.jit(device=True, inline=True)
def publish_dev(flags, b, stage, tile_id, value, tid):
    """Make this tile's writes visible, then set ``flags[b, stage, tile_id] = value`` (> 0)."""
    cuda.threadfence()
    cuda.syncthreads()
    if tid == 0:
        cuda.atomic.exch(flags, (b, stage, tile_id), np.int32(value))


@cuda.jit(device=True, inline=True)
def wait_for_tiles_dev(flags, b, stage, num_tiles, tid, num_threads):
    """Spin until tiles ``0 .. num_tiles - 1`` of row ``b`` have published ``stage``; returns this
    thread's share of the sum of ``value - 1`` over them. Only tiles with a smaller ticket are
    waited for, and they are running or done, so the wait always ends."""
    total = 0
    j = tid
    while j < num_tiles:
        v = cuda.atomic.add(flags, (b, stage, j), np.int32(0))
        while v == 0:
            v = cuda.atomic.add(flags, (b, stage, j), np.int32(0))
        total += v - 1
        j += num_threads
    cuda.threadfence()
    cuda.syncthreads()
    return total


@cuda.jit(device=True, inline=True)
def fallback_victim_dev(cache_policy, row, u, cursor, hot, e_now):
    """Miss ``u``'s fallback: the first slot not stamped E in Knuth-hash order from
    ``cursor + u * KNUTH`` (mod 2^32, mod H), stamped E; -1 if none (reference:
    ``fallback_victim_reference``)."""
    start = ((cursor + u * KNUTH) & MASK32) % hot
    for a in range(hot):
        slot = ((start + a * KNUTH) & MASK32) % hot
        if cache_policy[row, slot] != e_now:
            cache_policy[row, slot] = e_now
            return slot
    return -1


@cuda.jit(device=True, inline=True)
def needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, union_mode, compact):
    if u >= cap:
        return True
    if scratch_locs[rid, u] < 0:
        return False
    return union_mode or (scratch_state[row, compact + u] & ADMIT_BIT) != 0
