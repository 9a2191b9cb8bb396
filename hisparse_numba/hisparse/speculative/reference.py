"""NumPy reference (the oracle) of the speculative swap-in, ``load_cache_to_device_buffer_spec_mla``.

Same keywords as the launcher (``launch.py``: shapes and dtypes), on NumPy arrays, mutated in
place. ``request_reference`` runs one request as the list of its stages
(docs/speculative-swap-in.md, "Stages and versions"), one function each: classify, count,
number, duplicates, admission, victims, evictions, hash, finish, copy; every rung of the kernel
(``versions.py``) has a stage of the same name. The per-occurrence stages work on whole rows of
occurrences (NumPy passes), so that sglang's sizes (T = 8192, batch 64) take well under a second
per call; the per-miss stages of the commit stay loops, as the rules read. Every rung must equal
it on every output and state array. Lessons 01, 03, 04 and 08 run it beside the kernel.
"""

from __future__ import annotations

import numpy as np

from ...itemcopy import item_rows
from .hash import KNUTH, MASK32, h0, h1, hash_erase_reference, hash_insert_reference, knuth_hash
from .state import (ADMIT_BIT, CLAIM_BIT, CLOCK_VICTIM_SAMPLES, COMMIT_CHUNK, COMPACT_POS_MASK,
                          COUNT_GEN, COUNT_LAST, COUNT_UNION, COUNT_WORK, UNRESOLVED, approximate_candidate,
                          cursor_bits, epoch_bits, next_epoch, next_sigma, pack_clock,
                          pack_generation)
from .checks import SpecCall, check_speculative


def table_home(token, t):
    return int(knuth_hash(token)) % t


def table_insert_reference(table, sigma, token) -> None:
    """Ordered linear-probing insert (module docstring); entries of other epochs count as empty.
    At most ``t`` moves, as on the device (a full row only comes from a corrupted state)."""
    t = table.shape[0]
    v = (sigma << 32) | token
    p = table_home(token, t)
    for _ in range(t):
        c = int(table[p])
        if (c >> 32) != sigma:
            table[p] = v
            return
        if c == v:
            return
        if v > c:
            table[p], v = v, c
        p = (p + 1) % t


def table_find_reference(table, sigma, token) -> int:
    t = table.shape[0]
    v = (sigma << 32) | token
    p = table_home(token, t)
    for _ in range(t):
        if table[p] == v:
            return p
        p = (p + 1) % t
    raise AssertionError(f"token {token} not in the scratch table")


def copy_items_reference(host_cache, device_buffer, src, dst, item) -> None:
    """Copy host items ``src`` to device items ``dst`` (arrays; destinations distinct)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    if src.size == 0:
        return
    item_rows(device_buffer, item)[dst] = item_rows(host_cache, item)[src]


INVALID, TAIL, HOT, MISS = 0, 1, 2, 3     # kinds of occurrence (an unbacked miss is INVALID)


def hot_slots_reference(tokens, candidates, slot_tokens, hot, bank0, bank1, degraded):
    """The hot slot holding each token (-1: none) where ``candidates``: the positional fast path
    (``token < H`` and slot ``token`` holds it), bank 0, bank 1, then, once the request's hash is
    degraded, the first of the H slots that holds it. A bank entry counts only if its slot (< H)
    holds the token."""
    tok = np.where(candidates, tokens, 0)
    resident = slot_tokens[:hot].astype(np.int64)
    slot = np.full(tok.shape, -1, dtype=np.int64)
    fast = candidates & (tok < hot) & (resident[np.minimum(tok, hot - 1)] == tok)
    slot[fast] = tok[fast]
    mask = bank0.shape[0] - 1
    for bank, bucket in ((bank0, h0), (bank1, h1)):
        entry = bank[bucket(tok, mask)]
        s = entry >> 32
        ok = candidates & (slot < 0) & (entry >= 0) & ((entry & MASK32) == tok) & (s < hot)
        ok &= resident[np.where(ok, s, 0)] == tok
        slot[ok] = s[ok]
    if degraded:
        order = np.argsort(resident, kind="stable")
        at = np.minimum(np.searchsorted(resident[order], tok), hot - 1)
        ok = candidates & (slot < 0) & (resident[order][at] == tok)
        slot[ok] = order[at[ok]]
    return slot


def classify_reference(tokens, seq_lens, slot_tokens, slot_locs, host_locs, hot, tail, bank0,
                       bank1, degraded):
    """``(kinds, values)`` of occurrences ``tokens`` (with their steps' ``seq_lens``) of a request
    whose device-buffer rows are ``slot_tokens`` / ``slot_locs`` and host-location row
    ``host_locs``: INVALID (also a miss never backed up), TAIL (value = its location), HOT (the
    slot) or MISS (the host location)."""
    tok = tokens.astype(np.int64)
    kinds = np.full(tok.shape, INVALID, dtype=np.int64)
    values = np.full(tok.shape, -1, dtype=np.int64)
    valid = (tok >= 0) & (tok < seq_lens)
    if tail > 0:
        tail_tokens, tail_locs = slot_tokens[hot:hot + tail], slot_locs[hot:hot + tail]
        match = (tok[:, None] == tail_tokens[None, :]) & (tail_locs >= 0)[None, :]
        served = valid & (tok >= seq_lens - tail) & match.any(axis=1)
        kinds[served] = TAIL
        values[served] = tail_locs[match.argmax(axis=1)[served]]     # the first tail column
        valid &= ~served
    slot = hot_slots_reference(tok, valid, slot_tokens, hot, bank0, bank1, degraded)
    kinds[slot >= 0] = HOT
    values[slot >= 0] = slot[slot >= 0]
    missed = valid & (slot < 0)
    src = host_locs[np.where(missed, tok, 0)]
    missed &= src >= 0
    kinds[missed] = MISS
    values[missed] = src[missed]
    return kinds, values


def union_sample_positions(i, miss_count, hot) -> list:
    """Ring positions (after the cursor) that union-mode miss ``i`` samples.

    Miss ``i`` owns the positions ``i, i + miss_count, ...`` below ``hot``; its
    ``min(partition_size, CLOCK_VICTIM_SAMPLES)`` samples are spread evenly over them.
    """
    partition_size = (hot - 1 - i) // miss_count + 1
    sample_count = min(partition_size, CLOCK_VICTIM_SAMPLES)
    return [i + (sample * partition_size // sample_count) * miss_count
            for sample in range(sample_count)]


def union_victim_reference(ref, i, miss_count, cursor, hot, e_now, ebits) -> int:
    """Union mode: the oldest slot among miss ``i``'s samples that this call has not stamped
    (the first on a tie), or -1."""
    best, best_age = -1, -1
    for position in union_sample_positions(i, miss_count, hot):
        slot = (cursor + position) % hot
        if ref[slot] != e_now:
            age = (e_now - int(ref[slot])) & ((1 << ebits) - 1)
            if age > best_age:
                best, best_age = slot, age
    return best


def fallback_victim_reference(ref, u, cursor, hot, e_now) -> int:
    """The fallback of miss ``u`` (left without a victim): probe the ring in Knuth-hash order,
    ``start = (cursor + u * KNUTH) mod 2^32 mod H``, then ``(start + a * KNUTH) mod 2^32 mod H``
    for ``a = 0, 1, ...``, and take (stamp E) the first slot not stamped E; -1 if none.

    sglang runs these probes concurrently with CAS. For a power-of-two H every probe sequence is
    a suffix of one permutation of the ring (``cursor + n * KNUTH``), i.e. linear probing, so the
    set of slots taken does not depend on the order; the reference takes increasing ``u``."""
    start = ((cursor + u * KNUTH) & MASK32) % hot
    for a in range(hot):
        slot = ((start + a * KNUTH) & MASK32) % hot
        if ref[slot] != e_now:
            ref[slot] = e_now
            return slot
    return -1


def approximate_walk(u, miss_count, cap) -> tuple:
    """(first linear index, stride) of miss ``u``'s approximate-mode walk: ``unique_idx`` and
    ``miss_count``, counted from ``cap`` for a direct-overflow miss."""
    return (u - cap, miss_count - cap) if u >= cap else (u, miss_count)


def approximate_victims_reference(ref, need, miss_count, cap, hot, e_now) -> list:
    """Approximate mode: the victim of each miss in ``need`` (-1: its walk ended), stamping E.

    Miss ``u`` walks ``linear = ordinal, ordinal + stride, ... < hot`` (``approximate_walk``)
    over the candidates ``approximate_candidate(linear, E, hot)`` and claims the first one not
    stamped E. Misses that want the same slot settle it in rounds: every unsettled miss proposes
    the first unstamped candidate of its walk, the smallest ``unique_idx`` among a slot's
    proposers wins it and stamps E, and the others go on along their walks next round.
    """
    walks = {u: list(approximate_walk(u, miss_count, cap)) for u in need}
    victims = {u: -1 for u in need}
    pending = list(need)                       # increasing unique_idx
    while pending:
        proposals = {}
        for u in pending:
            walk = walks[u]
            while walk[0] < hot and ref[approximate_candidate(walk[0], e_now, hot)] == e_now:
                walk[0] += walk[1]
            if walk[0] < hot:
                proposals.setdefault(approximate_candidate(walk[0], e_now, hot), u)
        for slot, u in proposals.items():
            victims[u] = slot
            ref[slot] = e_now
        pending = [u for u in pending if victims[u] < 0 and walks[u][0] < hot]
    return [victims[u] for u in need]


class Request:
    """What the stages of one request share: its rows of the arguments and of the state, the
    call's CLOCK epoch and scratch epoch, and what each stage leaves for the next ones."""

    def __init__(self, call: SpecCall, b: int):
        self.call, self.b = call, b
        self.steps, self.top_k, self.hot, self.tail = call.steps, call.top_k, call.hot, call.tail
        self.n, self.cap, self.t = call.num_requests, call.capacity, call.steps * call.top_k
        state, t = call.state, self.t
        self.rid = rid = int(call.req_pool_indices[b])
        self.slot_tokens = call.device_buffer_tokens[rid]
        self.slot_locs = call.device_buffer_locs[rid]
        self.host_locs = call.host_cache_locs[rid]
        self.bank0, self.bank1 = state.cache_index[rid, 0], state.cache_index[rid, 1]
        self.ref = state.cache_policy[rid + 1]
        self.scratch = state.scratch_locs[rid]
        self.counters = state.scratch_state[0]
        metadata = state.scratch_state[rid + 1, :4 * t].view(np.int64)
        self.table, self.index = metadata[:t], metadata[t:2 * t]
        self.compact = state.scratch_state[rid + 1, 4 * t:5 * t]
        self.cbits, self.ebits = cursor_bits(self.hot), epoch_bits(self.hot)
        packed = int(state.cache_policy[0, rid])
        self.e_now = next_epoch(packed, self.cbits, self.ebits)
        self.cursor = (packed & MASK32) & ((1 << self.cbits) - 1)
        gen = int(self.counters[COUNT_GEN * self.n + rid])
        self.degraded, self.sigma = gen < 0, next_sigma(gen)
        self.tokens = call.top_k_tokens[b].reshape(t)
        self.lens = np.repeat(call.seq_lens[b * self.steps:(b + 1) * self.steps].astype(np.int64),
                              self.top_k)


def classify_stage(r: Request) -> None:
    """Every occurrence's kind; outputs of tail and hot hits, stamps, scratch-table inserts."""
    r.kinds, r.values = classify_reference(r.tokens, r.lens, r.slot_tokens, r.slot_locs,
                                           r.host_locs, r.hot, r.tail, r.bank0, r.bank1, r.degraded)
    r.locations = np.where(r.kinds == TAIL, r.values, -1)
    hot_occ = r.kinds == HOT
    r.locations[hot_occ] = r.slot_locs[r.values[hot_occ]]
    stamped = np.unique(r.values[hot_occ])
    stamped = stamped[r.ref[stamped] != r.e_now]
    r.union_hits = int(stamped.size)
    r.ref[stamped] = r.e_now
    for tok in np.unique(r.tokens[r.kinds == MISS]):   # the layout depends only on the token set
        table_insert_reference(r.table, r.sigma, int(tok))


def count_stage(r: Request) -> None:
    """The unique misses: each missed token's first occurrence, in occurrence order."""
    r.miss_occ = np.flatnonzero(r.kinds == MISS)
    _, first = np.unique(r.tokens[r.miss_occ], return_index=True)
    r.first_occ = r.miss_occ[np.sort(first)]          # unique_idx -> its first occurrence
    r.m = int(r.first_occ.size)


def number_stage(r: Request) -> None:
    """unique_idx: index and compact entries, first occurrences' outputs, the scratch copies."""
    m, cap, sigma = r.m, r.cap, r.sigma
    r.unique_tokens = r.tokens[r.first_occ].astype(np.int64)
    tagged = np.flatnonzero((r.table >> 32) == sigma)   # this call's entries: each token's position
    by_token = np.argsort(r.table[tagged] & MASK32)
    positions = tagged[by_token][np.searchsorted((r.table[tagged] & MASK32)[by_token],
                                                 r.unique_tokens)]
    r.index[positions] = (sigma << 32) | np.arange(m)
    r.compact[:m] = positions
    u = np.arange(m)
    scratch_loc = r.scratch[np.minimum(u, cap - 1)]
    r.locations[r.first_occ] = np.where(u < cap, scratch_loc, -2 - u)
    copied = (u < cap) & (scratch_loc >= 0)
    r.copy_src = np.where(copied, r.values[r.first_occ], -1)      # host location, or -1
    r.copy_dst = np.where(copied, scratch_loc, -1)                # device location, or -1


def duplicates_stage(r: Request) -> None:
    """The later occurrences of each missed token output its first occurrence's location."""
    order = np.argsort(r.unique_tokens)
    u = order[np.searchsorted(r.unique_tokens[order], r.tokens[r.miss_occ])]
    r.locations[r.miss_occ] = r.locations[r.first_occ[u]]


def admission_stage(r: Request) -> None:
    """The mode; in approximate mode clear and re-stamp the epochs, claim and admit misses."""
    r.overflow = r.m > r.cap
    r.union_mode = r.m + r.union_hits <= r.hot
    if r.union_mode:
        return
    if not r.overflow:
        r.ref[:r.hot] = 0
    last = slice((r.steps - 1) * r.top_k, r.t)     # the classification is still valid:
    kinds, values = r.kinds[last], r.values[last]  # the gather changed only ref
    r.ref[values[kinds == HOT]] = r.e_now
    unique_idx = dict(zip(r.unique_tokens.tolist(), range(r.m)))
    claimed = sorted({unique_idx[int(tok)] for tok in r.tokens[last][kinds == MISS]})
    budget = r.hot if not r.overflow else max(0, r.hot - r.union_hits - (r.m - r.cap))
    for ordinal, u in enumerate(u for u in claimed if u < r.cap):
        r.compact[u] |= CLAIM_BIT | (ADMIT_BIT if ordinal < budget else 0)


def needs_victim(r: Request, u: int) -> bool:
    """Whether miss ``u`` takes a hot slot: every direct-overflow miss; a scratch miss with a
    location in union mode, or admitted in approximate mode."""
    if u >= r.cap:
        return True
    return r.scratch[u] >= 0 and (r.union_mode or (r.compact[u] & ADMIT_BIT) != 0)


def victims_stage(r: Request) -> None:
    """A hot slot not stamped this call for each miss that needs one (-1: none left)."""
    r.need = [u for u in range(r.m) if needs_victim(r, u)]
    ref, m, cursor, hot, e_now = r.ref, r.m, r.cursor, r.hot, r.e_now
    if r.union_mode:
        # chunk by chunk, as sglang's commit block: sample, then the chunk's fallbacks, whose
        # stamps the next chunk's samples see
        r.victims = [-1] * len(r.need)
        for lo in range(0, m, COMMIT_CHUNK):
            chunk = [i for i, u in enumerate(r.need) if lo <= u < lo + COMMIT_CHUNK]
            for i in chunk:
                r.victims[i] = union_victim_reference(ref, r.need[i], m, cursor, hot, e_now,
                                                      r.ebits)
            for i in chunk:
                if r.victims[i] >= 0:
                    ref[r.victims[i]] = e_now
            for i in chunk:
                if r.victims[i] < 0:
                    r.victims[i] = fallback_victim_reference(ref, r.need[i], cursor, hot, e_now)
    else:
        r.victims = approximate_victims_reference(ref, r.need, m, r.cap, hot, e_now)
        for i, u in enumerate(r.need):
            if r.victims[i] < 0:
                r.victims[i] = fallback_victim_reference(ref, u, cursor, hot, e_now)


def evictions_stage(r: Request) -> None:
    """Each victim with a location: its token leaves the hash, the miss's token takes the slot,
    then zero-copy promotion, or a direct-overflow miss is listed to copy into the slot's
    location. A direct-overflow miss without one is UNRESOLVED."""
    r.inserts = []
    for v, u in zip(r.victims, r.need):
        p = int(r.compact[u]) & COMPACT_POS_MASK
        tok = int(r.table[p]) & MASK32
        if v >= 0 and r.slot_locs[v] >= 0:
            old_loc, old_tok = int(r.slot_locs[v]), int(r.slot_tokens[v])
            if old_tok >= 0:
                hash_erase_reference(r.bank0, r.bank1, old_tok, v)
            r.slot_tokens[v] = tok
            if u < r.cap:
                r.slot_locs[v], r.scratch[u] = r.scratch[u], old_loc
            else:
                r.index[p] = (r.sigma << 32) | old_loc
                r.copy_src[u], r.copy_dst[u] = int(r.host_locs[tok]), old_loc
            r.inserts.append((v << 32) | tok)
        elif u >= r.cap:
            r.index[p] = (r.sigma << 32) | UNRESOLVED


def hash_stage(r: Request) -> None:
    """The new tokens into the hash banks (rounds, then cuckoo); a failure degrades the hash."""
    r.degraded |= hash_insert_reference(r.bank0, r.bank1, r.inserts)


def finish_stage(r: Request) -> None:
    """Direct-overflow outputs, every output, the counters, the CLOCK state and the plan."""
    if r.overflow:
        direct = np.flatnonzero(r.locations <= -2)
        p = r.compact[-2 - r.locations[direct]].astype(np.int64) & COMPACT_POS_MASK
        low = r.index[p] & MASK32
        r.locations[direct] = np.where(low == UNRESOLVED, -1, low)
    r.call.top_k_device_locs[r.b].reshape(r.t)[:] = r.locations
    n, rid = r.n, r.rid
    r.counters[COUNT_LAST * n + rid] = r.m
    r.counters[COUNT_WORK * n + rid] = 0
    r.counters[COUNT_UNION * n + rid] = 0
    r.counters[COUNT_GEN * n + rid] = pack_generation(r.sigma, r.degraded)
    r.call.state.cache_policy[0, rid] = pack_clock(r.e_now, (r.cursor + min(r.m, r.hot)) % r.hot,
                                                   r.cbits)
    if r.call.record:
        r.call.miss_src[r.b, :r.m] = r.copy_src
        r.call.miss_dst[r.b, :r.m] = r.copy_dst
        r.call.miss_count[r.b] = r.m


def copy_stage(r: Request) -> None:
    """Every copied miss's item, host -> device (the plan's pairs)."""
    copied = r.copy_dst >= 0
    copy_items_reference(r.call.host_cache, r.call.device_buffer, r.copy_src[copied],
                         r.copy_dst[copied], r.call.item_size_bytes)


def request_reference(call: SpecCall, b: int) -> None:
    """Gather and commit of real row ``b``: the stages of docs/speculative-swap-in.md."""
    r = Request(call, b)
    classify_stage(r)
    count_stage(r)
    number_stage(r)
    duplicates_stage(r)
    admission_stage(r)
    victims_stage(r)
    evictions_stage(r)
    hash_stage(r)
    finish_stage(r)
    copy_stage(r)


def load_cache_to_device_buffer_spec_mla_reference(
        *, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, state, num_real_reqs,
        miss_src=None, miss_dst=None, miss_count=None, item_size_bytes=None,
        checks="full", version=None) -> None:
    """NumPy oracle of the launcher (same keywords; NumPy arrays; mutates them in place).

    Shapes/dtypes: see the launcher. Written per request, stage by stage. ``version`` (the
    launcher's rung) is ignored: every rung computes this.
    """
    keywords = dict(locals())
    del keywords["version"]
    call = check_speculative(**keywords)
    real = int(num_real_reqs[0])
    for b in range(call.batch):
        if b < real:
            request_reference(call, b)
        else:
            top_k_device_locs[b] = 0
            if call.record:
                miss_count[b] = 0
