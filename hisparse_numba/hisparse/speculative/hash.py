"""The two hash banks of the speculative state: token -> hot slot (``cache_index``).

Bank 0 is indexed by Knuth's multiplicative hash, bank 1 by sglang's finaliser (``h1``); an entry
packs ``(slot << 32) | token``, ``-1`` is empty and ``-2`` deleted. The hash is a hint: a lookup
trusts an entry only if the slot holds the token. docs/speculative-swap-in.md ("Hash banks") states
the behaviour, including this project's rule for inserts:

Deterministic hash inserts (sglang lets atomics race): the entries to insert (in a fixed item order)
first try bank 0, then bank 1, each in one round where a bucket that is free *before* the round
goes to the largest competing entry; whatever is left is cuckoo-inserted one by one in item order by
thread 0 (at most ``MAX_KICKS`` displacements, alternating banks; a failure drops the displaced
entry and sets HASH_DEGRADED, after which lookups fall back to a linear scan of the H slots). The
device settles each round's contention in a shared table when the items fit (one read of the banks,
one table for both banks' rounds, then plain stores: the speculative commit), else by
``atomic.max`` on the banks themselves (the initialiser).

Reference functions first, then their device versions. Used by ``state.py`` (the
initialiser) and the speculative swap-in; lessons 01, 03, 04 and 08 run both.
"""

from __future__ import annotations

import numpy as np

from ...blockscan import block_exclusive_scan_dev
from ...device import cuda

KNUTH = 2654435761
MASK32 = 0xFFFFFFFF
MAX_KICKS = 64


def knuth_hash(x):
    """Knuth's multiplicative hash of ``x`` (< 2^31, so the int64 product cannot overflow), as a
    uint32: the home of the scratch table and of the claim set."""
    return (np.int64(x) * KNUTH) & MASK32


def h0(token, mask):
    """Bank 0: Knuth's multiplicative hash, masked to the bank."""
    return (np.int64(token) * KNUTH) & MASK32 & mask


def h1(token, mask):
    """Bank 1: sglang's murmur-style finaliser in uint32 arithmetic, ``h ^= h >> 16;
    h *= 0x7FEB352D; h ^= h >> 15; h *= 0x846CA68B; h ^= h >> 16``, masked to the bank.

    Written so that every intermediate fits an int64 (the same code runs in NumPy, in Python and
    compiled on the device): the first product is < 2^63; the second multiplier is > 2^31, so
    its product is taken in two 16-bit halves of the multiplier, modulo 2^32.
    """
    x = np.int64(token) & 0xFFFFFFFF
    x = ((x >> 16) ^ x) * 0x7FEB352D & 0xFFFFFFFF
    x = (x >> 15) ^ x
    x = (x * 0xA68B + (((x * 0x846C) & 0xFFFF) << 16)) & 0xFFFFFFFF     # x * 0x846CA68B mod 2^32
    x = (x >> 16) ^ x
    return x & mask



knuth_hash_dev = cuda.jit(device=True, inline=True)(knuth_hash)
h0_dev = cuda.jit(device=True, inline=True)(h0)
h1_dev = cuda.jit(device=True, inline=True)(h1)


# ---------------------------------------------------------------------------------------------
# Hash inserts: the reference.

def hash_lookup_reference(bank0, bank1, dbt_row, token, hot, degraded):
    """Hot slot holding ``token`` (fast path, bank 0, bank 1, linear scan if degraded) or -1."""
    if token < hot and dbt_row[token] == token:
        return token
    mask = bank0.shape[0] - 1
    for bank, b in ((bank0, h0(token, mask)), (bank1, h1(token, mask))):
        e = int(bank[b])
        if e >= 0 and (e & MASK32) == token:
            slot = e >> 32
            if slot < hot and dbt_row[slot] == token:
                return slot
    if degraded:
        hits = np.flatnonzero(dbt_row[:hot] == token)
        if hits.size:
            return int(hits[0])
    return -1


def hash_erase_reference(bank0, bank1, token, slot) -> None:
    mask = bank0.shape[0] - 1
    e = (slot << 32) | token
    if bank0[h0(token, mask)] == e:
        bank0[h0(token, mask)] = -2
    elif bank1[h1(token, mask)] == e:
        bank1[h1(token, mask)] = -2


def hash_insert_reference(bank0, bank1, entries) -> bool:
    """Insert ``entries`` (packed, in item order) by the rounds of the module docstring.

    Returns True when the hash degraded (some entry could not be placed).
    """
    mask = bank0.shape[0] - 1
    pending = list(entries)
    for bank, hfun in ((bank0, h0), (bank1, h1)):
        best = {}
        for e in pending:
            b = hfun(e & MASK32, mask)
            if bank[b] < 0:
                best[b] = max(best.get(b, -1), e)
        for b, e in best.items():
            bank[b] = e
        pending = [e for e in pending if bank[hfun(e & MASK32, mask)] != e]
    degraded = False
    for e in pending:
        degraded |= not _cuckoo_reference(bank0, bank1, e, mask)
    return degraded


def _cuckoo_reference(bank0, bank1, e, mask) -> bool:
    for kick in range(MAX_KICKS):
        tok = e & MASK32
        b0, b1 = h0(tok, mask), h1(tok, mask)
        if bank0[b0] < 0:
            bank0[b0] = e
            return True
        if bank1[b1] < 0:
            bank1[b1] = e
            return True
        if kick % 2 == 0:
            e, bank0[b0] = int(bank0[b0]), e
        else:
            e, bank1[b1] = int(bank1[b1]), e
    return False


# ---------------------------------------------------------------------------------------------
# Hash inserts: device functions (every thread of the block calls them together).

@cuda.jit(device=True, inline=True)
def thread_range_dev(n, tid, nthreads):
    """``[start, end)``: thread ``tid``'s consecutive share of ``n`` items (scans need items in
    thread order)."""
    chunk = (n + nthreads - 1) // nthreads
    start = min(n, tid * chunk)
    return start, min(n, start + chunk)


@cuda.jit(device=True, inline=True)
def bucket_entry_dev(rid, dbt, slots, tokens, i, mask):
    """(bank-0 bucket, bank-1 bucket, packed entry) of item ``i``: the token hot slot ``slots[i]``
    holds, kept in ``tokens[i]`` (shared) for the first ``len(tokens)`` items, else read from
    ``dbt``."""
    s = np.int64(slots[i])
    tok = np.int64(tokens[i]) if i < tokens.shape[0] else np.int64(dbt[rid, s])
    return h0_dev(tok, mask), h1_dev(tok, mask), (s << 32) | tok


@cuda.jit(device=True, inline=True)
def hash_lookup_dev(cache_index, rid, dbt, token, hot, degraded):
    if token < hot:
        if dbt[rid, token] == token:
            return token
    mask = cache_index.shape[2] - 1
    e0 = cache_index[rid, 0, h0_dev(token, mask)]     # both banks read at once: one latency
    e1 = cache_index[rid, 1, h1_dev(token, mask)]
    if e0 >= 0 and (e0 & 0xFFFFFFFF) == token:
        slot = e0 >> 32
        if slot < hot:
            if dbt[rid, slot] == token:
                return slot
    if e1 >= 0 and (e1 & 0xFFFFFFFF) == token:
        slot = e1 >> 32
        if slot < hot:
            if dbt[rid, slot] == token:
                return slot
    if degraded:
        for s in range(hot):
            if dbt[rid, s] == token:
                return s
    return -1


@cuda.jit(device=True, inline=True)
def hash_erase_dev(cache_index, rid, token, slot):
    mask = cache_index.shape[2] - 1
    e = (slot << 32) | token
    b0 = h0_dev(token, mask)
    b1 = h1_dev(token, mask)
    e0 = cache_index[rid, 0, b0]     # both banks read at once: one latency
    e1 = cache_index[rid, 1, b1]
    if e0 == e:
        cache_index[rid, 0, b0] = -2
    elif e1 == e:
        cache_index[rid, 1, b1] = -2


RACE0, FREE1, RACE1, PENDING = 1, 2, 4, 8   # bits of an item's state in pend (hash_insert_dev)
SLOT_BITS = 15          # a hot slot is < MAX_HOT_BUFFER_SIZE = 2^15
SETTLE_CELLS = 2048     # cells of a shared settle table: rounds of up to 1024 items
SETTLE_MAX_BANK = 1 << 15   # a settle key (bank, bucket) and a slot fit 31 bits up to this bank size


@cuda.jit(device=True, inline=True)
def stage_item_dev(pend, tokens, i, slot, token):
    """Item ``i`` before the rounds: pending when it has a slot, its token kept in ``tokens``
    (shared) when ``i < len(tokens)``."""
    pend[i] = PENDING if slot >= 0 else 0
    if slot >= 0 and i < tokens.shape[0]:
        tokens[i] = token


@cuda.jit(device=True, inline=True)
def snapshot_pass_dev(cache_index, rid, dbt, slots, tokens, n_items, pend, cells, mask, settle,
                      read, offer, tid, nthreads):
    """With ``read``, both buckets of every pending item read at once (RACE0: bank 0's is free;
    FREE1: bank 1's is); with ``offer``, a free bank-0 bucket is offered (offer_dev). Then a
    barrier. Bank 1 is not written during bank 0's round, so this one snapshot serves both. A
    settled round offers in the reading pass; a racing one, whose offers write the bank, in a pass
    of its own after it."""
    i = tid
    while i < n_items:
        state = pend[i]
        if state & PENDING:
            b0, b1, e = bucket_entry_dev(rid, dbt, slots, tokens, i, mask)
            if read:
                c0 = cache_index[rid, 0, b0]     # both buckets read at once: one latency
                c1 = cache_index[rid, 1, b1]
                state |= (RACE0 if c0 < 0 else 0) | (FREE1 if c1 < 0 else 0)
            if offer and state & RACE0:
                offer_dev(cache_index, rid, cells, settle, 0, b0, mask, slots[i], e)
            pend[i] = state
        i += nthreads
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def offer_dev(cache_index, rid, cells, settle, bank, bucket, mask, slot, e):
    """Offer entry ``e`` (hot slot ``slot``) for ``bucket`` of ``bank``: to the settle table, or
    (racing) to the bank itself by ``atomic.max``."""
    if settle:
        settle_offer_dev(cells, bank, bucket, mask, slot)
    else:
        cuda.atomic.max(cache_index, (rid, bank, bucket), e)


@cuda.jit(device=True, inline=True)
def won_dev(cache_index, rid, cells, settle, bank, bucket, mask, slot, e):
    """Whether entry ``e`` won ``bucket`` of ``bank`` (offers made before the last barrier): the
    settle table's winner stores its entry plainly; racing, the bank holds the largest offer."""
    if settle:
        if settle_winner_dev(cells, bank, bucket, mask) == slot:
            cache_index[rid, bank, bucket] = e
            return True
        return False
    return cache_index[rid, bank, bucket] == e


@cuda.jit(device=True, inline=True)
def round_pass_dev(cache_index, rid, dbt, slots, tokens, n_items, pend, cells, mask, settle, bank,
                   tid, nthreads):
    """The end of bank ``bank``'s round: each pending item that raced there and won is placed. In
    bank 0's round every other pending item whose bank-1 bucket was free offers itself to bank 1
    (bank 1 is not written in bank 0's round, so the snapshot holds). Returns 1 when any of this
    thread's items is still pending, else 0; the caller's barrier follows."""
    race = RACE0 if bank == 0 else RACE1
    left = 0
    i = tid
    while i < n_items:
        state = pend[i]
        if state & PENDING:
            b0, b1, e = bucket_entry_dev(rid, dbt, slots, tokens, i, mask)
            if state & race and won_dev(cache_index, rid, cells, settle, bank,
                                        b0 if bank == 0 else b1, mask, slots[i], e):
                state = 0
            elif bank == 0 and state & FREE1:
                offer_dev(cache_index, rid, cells, settle, 1, b1, mask, slots[i], e)
                state |= RACE1
            pend[i] = state
            if state != 0:
                left = 1
        i += nthreads
    return left


@cuda.jit(device=True, inline=True)
def settle_cell_dev(cells, bank, bucket, mask):
    """(home cell, key) of bucket ``bucket`` of ``bank`` in the settle table ``cells``: the key is
    the bucket's index in the flattened banks, ``bank * (mask + 1) + bucket``; bank 1's buckets
    start half a table further on, so that the same bucket of both banks has different homes."""
    return ((bucket + bank * (cells.shape[0] >> 1)) & (cells.shape[0] - 1),
            bank * (mask + 1) + bucket)


@cuda.jit(device=True, inline=True)
def settle_offer_dev(cells, bank, bucket, mask, slot):
    """Offer hot slot ``slot`` for ``bucket`` of ``bank`` in the shared open-addressing table
    ``cells`` (a power of two of int32; a cell packs ``(key << SLOT_BITS) | slot``, -1 empty; the
    key is below ``2 * SETTLE_MAX_BANK``). The key's cell keeps the largest slot offered: the
    largest entry, since the slot is an entry's high word and no two items share a slot."""
    c, key = settle_cell_dev(cells, bank, bucket, mask)
    packed = np.int32((key << SLOT_BITS) | slot)
    while True:
        k = cells[c]
        if k == -1:
            k = cuda.atomic.cas(cells, c, np.int32(-1), packed)
            if k == -1:
                return
        if (k >> SLOT_BITS) == key:
            cuda.atomic.max(cells, c, packed)
            return
        c = (c + 1) & (cells.shape[0] - 1)


@cuda.jit(device=True, inline=True)
def settle_winner_dev(cells, bank, bucket, mask):
    """The slot that won ``bucket`` of ``bank`` in ``cells`` (offered to before the last
    barrier)."""
    c, key = settle_cell_dev(cells, bank, bucket, mask)
    while (cells[c] >> SLOT_BITS) != key:
        c = (c + 1) & (cells.shape[0] - 1)
    return cells[c] & ((1 << SLOT_BITS) - 1)


@cuda.jit(device=True, inline=True)
def clear_cells_dev(cells, tid, nthreads):
    """Empty the settle table (visible after the caller's next barrier)."""
    j = tid
    while j < cells.shape[0]:
        cells[j] = -1
        j += nthreads


@cuda.jit(device=True, inline=True)
def cuckoo_dev(cache_index, rid, e, mask):
    """_cuckoo_reference on the device (one thread): False when entry ``e``, or one it displaced,
    found no bucket in MAX_KICKS kicks (that entry is dropped)."""
    for kick in range(MAX_KICKS):
        tok = e & 0xFFFFFFFF
        b0 = h0_dev(tok, mask)
        b1 = h1_dev(tok, mask)
        c0 = cache_index[rid, 0, b0]    # both buckets read at once: one latency
        c1 = cache_index[rid, 1, b1]
        if c0 < 0:
            cache_index[rid, 0, b0] = e
            return True
        if c1 < 0:
            cache_index[rid, 1, b1] = e
            return True
        if kick % 2 == 0:
            cache_index[rid, 0, b0] = e
            e = c0
        else:
            cache_index[rid, 1, b1] = e
            e = c1
    return False


@cuda.jit(device=True, inline=True)
def hash_insert_dev(cache_index, rid, dbt, slots, n_items, pend, flag, scan, cells, tid, nthreads,
                    staged):
    """Insert ``(slots[i] << 32) | dbt[rid, slots[i]]`` for every ``i < n_items`` with
    ``slots[i] >= 0`` (rounds of the module docstring), ending with a barrier. ``pend`` is a
    scratch shared array of ``n_items``, ``scan`` a shared int32 array of ``nthreads``;
    ``flag[0]`` is set to 1 by thread 0 when the hash degrades. ``cells``, a shared int32 table (a
    power of two; length 1 when the kernel has no room for one), settles the rounds when it holds
    twice the items, every token fits in ``scan`` and the banks have at most ``SETTLE_MAX_BANK``
    buckets; otherwise the rounds race on the banks (``atomic.max``, offer_dev). With ``staged``,
    the caller has already run stage_item_dev on every item (the tokens of the first
    ``len(scan)`` items are in ``scan``) and cleared ``cells``, followed by a barrier: the commit
    does that in the pass that writes the tokens into their slots, which saves a pass and a
    barrier here."""
    mask = cache_index.shape[2] - 1
    settle = 2 * n_items <= cells.shape[0] and n_items <= scan.shape[0] and mask < SETTLE_MAX_BANK
    if not staged:
        i = tid
        while i < n_items:
            s = slots[i]
            stage_item_dev(pend, scan, i, s, dbt[rid, s] if s >= 0 and i < scan.shape[0] else -1)
            i += nthreads
        if settle:
            clear_cells_dev(cells, tid, nthreads)
        cuda.syncthreads()
    snapshot_pass_dev(cache_index, rid, dbt, slots, scan, n_items, pend, cells, mask, settle, True,
                      settle, tid, nthreads)
    if not settle:
        snapshot_pass_dev(cache_index, rid, dbt, slots, scan, n_items, pend, cells, mask, False,
                          False, True, tid, nthreads)
    round_pass_dev(cache_index, rid, dbt, slots, scan, n_items, pend, cells, mask, settle, 0, tid,
                   nthreads)
    cuda.syncthreads()
    left = round_pass_dev(cache_index, rid, dbt, slots, scan, n_items, pend, cells, mask, settle, 1,
                          tid, nthreads)
    # The leftovers go through the serial cuckoo. List them first (in item order) so that thread 0
    # does not walk all n_items; when they do not fit in ``scan`` it walks ``pend`` instead.
    if cuda.syncthreads_or(left):    # none left over is the common case: this barrier ends it
        i0, i1 = thread_range_dev(n_items, tid, nthreads)
        count = 0
        for i in range(i0, i1):
            if pend[i] != 0:
                count += 1
        k, left_over = block_exclusive_scan_dev(scan, count, tid, nthreads)
        listed = left_over <= nthreads
        if listed:
            for i in range(i0, i1):
                if pend[i] != 0:
                    scan[k] = i
                    k += 1
            cuda.syncthreads()
        if tid == 0:
            for j in range(left_over if listed else n_items):
                i = scan[j] if listed else j
                if pend[i] != 0:
                    s = np.int64(slots[i])
                    if not cuckoo_dev(cache_index, rid, (s << 32) | np.int64(dbt[rid, s]), mask):
                        flag[0] = 1
        cuda.syncthreads()
