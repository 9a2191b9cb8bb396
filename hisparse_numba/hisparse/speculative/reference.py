"""NumPy reference (the oracle) of the speculative swap-in, ``load_cache_to_device_buffer_spec_mla``.

Same keywords as the launcher (``launch.py``: shapes and dtypes), on NumPy arrays, mutated in
place; written per request, in the order of docs/speculative-swap-in.md: classify every
occurrence, number the unique misses, copy them into scratch, then commit (mode, admission,
victims, promotion, hash, direct overflow, counters). The per-occurrence steps work on whole rows
of occurrences (NumPy passes), so that sglang's sizes (T = 8192, batch 64) take well under a
second per call; the per-miss steps of the commit stay loops, as the rules read. The kernel (``kernel.py``)
must equal it on every output and state array. Lessons 01, 03, 04 and 08 run it beside the kernel.
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


def victims_reference(ref, need, m, cap, cursor, hot, e_now, ebits, union_mode) -> list:
    """The victim slot of each unique miss in ``need`` (stamping ``ref``). In union mode chunk by
    chunk, as sglang's commit block: sample, then the chunk's fallbacks, whose stamps the next
    chunk's samples see; in approximate mode the spread walks, then the fallbacks."""
    if not union_mode:
        victims = approximate_victims_reference(ref, need, m, cap, hot, e_now)
        for i in range(len(need)):
            if victims[i] < 0:
                victims[i] = fallback_victim_reference(ref, need[i], cursor, hot, e_now)
        return victims
    victims = [-1] * len(need)
    for lo in range(0, m, COMMIT_CHUNK):
        chunk = [i for i, u in enumerate(need) if lo <= u < lo + COMMIT_CHUNK]
        for i in chunk:
            victims[i] = union_victim_reference(ref, need[i], m, cursor, hot, e_now, ebits)
        for i in chunk:
            if victims[i] >= 0:
                ref[victims[i]] = e_now
        for i in chunk:
            if victims[i] < 0:
                victims[i] = fallback_victim_reference(ref, need[i], cursor, hot, e_now)
    return victims


def request_reference(call: SpecCall, b: int) -> None:
    """Gather and commit of real row ``b``."""
    steps, top_k, hot, tail, n, cap = (call.steps, call.top_k, call.hot, call.tail,
                                       call.num_requests, call.capacity)
    t = steps * top_k
    state, seq_lens = call.state, call.seq_lens
    rid = int(call.req_pool_indices[b])
    slot_tokens, slot_locs = call.device_buffer_tokens[rid], call.device_buffer_locs[rid]
    host_locs = call.host_cache_locs[rid]
    bank0, bank1 = state.cache_index[rid, 0], state.cache_index[rid, 1]
    ref = state.cache_policy[rid + 1]
    scratch = state.scratch_locs[rid]
    scratch_state = state.scratch_state
    metadata = scratch_state[rid + 1, :4 * t].view(np.int64)
    table, index, compact = metadata[:t], metadata[t:2 * t], scratch_state[rid + 1, 4 * t:5 * t]
    cbits, ebits = cursor_bits(hot), epoch_bits(hot)
    packed = int(state.cache_policy[0, rid])
    e_now = next_epoch(packed, cbits, ebits)
    cursor = (packed & MASK32) & ((1 << cbits) - 1)
    gen = int(scratch_state[0, COUNT_GEN * n + rid])
    degraded = gen < 0
    sigma = next_sigma(gen)
    tokens = call.top_k_tokens[b].reshape(t)
    out = call.top_k_device_locs[b].reshape(t)
    plan = (call.miss_src, call.miss_dst, call.miss_count) if call.record else None

    # ---- gather: classify every occurrence, deduplicate misses, copy each unique miss once
    lens = np.repeat(seq_lens[b * steps:(b + 1) * steps].astype(np.int64), top_k)
    kinds, values = classify_reference(tokens, lens, slot_tokens, slot_locs, host_locs, hot, tail,
                                       bank0, bank1, degraded)
    locations = np.where(kinds == TAIL, values, -1)
    hot_occ = kinds == HOT
    locations[hot_occ] = slot_locs[values[hot_occ]]
    stamped = np.unique(values[hot_occ])
    stamped = stamped[ref[stamped] != e_now]
    union_hits = int(stamped.size)
    ref[stamped] = e_now
    # unique misses, numbered by first occurrence
    miss_occ = np.flatnonzero(kinds == MISS)
    miss_tokens = tokens[miss_occ].astype(np.int64)
    first_tokens, first = np.unique(miss_tokens, return_index=True)
    by_first = np.argsort(first)
    unique_tokens = first_tokens[by_first]            # unique_idx -> token
    unique_src = values[miss_occ[first[by_first]]]    # unique_idx -> host location
    m = int(unique_tokens.size)
    for tok in unique_tokens:                         # the layout depends only on the token set
        table_insert_reference(table, sigma, int(tok))
    tagged = np.flatnonzero((table >> 32) == sigma)   # this call's entries: position of each token
    by_token = np.argsort(table[tagged] & MASK32)
    positions = tagged[by_token][np.searchsorted((table[tagged] & MASK32)[by_token], unique_tokens)]
    index[positions] = (sigma << 32) | np.arange(m)
    compact[:m] = positions
    rank = np.empty(m, dtype=np.int64)
    rank[by_first] = np.arange(m)
    occ_u = rank[np.searchsorted(first_tokens, miss_tokens)]     # unique_idx of each miss
    locations[miss_occ] = np.where(occ_u < cap, scratch[np.minimum(occ_u, cap - 1)], -2 - occ_u)
    in_scratch = np.arange(min(m, cap))
    copied = in_scratch[scratch[in_scratch] >= 0]
    copy_items_reference(call.host_cache, call.device_buffer, unique_src[copied], scratch[copied],
                         call.item_size_bytes)
    if plan is not None:
        plan[0][b, in_scratch] = np.where(scratch[in_scratch] >= 0, unique_src[in_scratch], -1)
        plan[1][b, in_scratch] = np.where(scratch[in_scratch] >= 0, scratch[in_scratch], -1)
    unique_idx = dict(zip(unique_tokens.tolist(), range(m)))

    # ---- commit: mode, admission, victims, promotion, hash, overflow fix-up
    overflow = m > cap
    n_over = m - cap if overflow else 0
    union_mode = m + union_hits <= hot
    if not union_mode:
        if not overflow:
            ref[:hot] = 0
        last = slice((steps - 1) * top_k, t)          # the classification is still valid:
        ref[values[last][kinds[last] == HOT]] = e_now    # the gather changed only ref
        claimed = {unique_idx[int(tok)] for tok in tokens[last][kinds[last] == MISS]}
        claimed = {u for u in claimed if u < cap}
        budget = hot if not overflow else max(0, hot - union_hits - n_over)
        for ordinal, u in enumerate(sorted(claimed)):
            compact[u] |= CLAIM_BIT | (ADMIT_BIT if ordinal < budget else 0)

    need = [u for u in range(m)     # every overflowing miss; a scratch miss when admitted
            if u >= cap or (scratch[u] >= 0 and (union_mode or (compact[u] & ADMIT_BIT) != 0))]
    victims = victims_reference(ref, need, m, cap, cursor, hot, e_now, ebits, union_mode)
    inserts = []
    for i, u in enumerate(need):
        v = victims[i]
        p = int(compact[u]) & COMPACT_POS_MASK
        tok = int(table[p]) & MASK32
        if v >= 0 and slot_locs[v] >= 0:
            old_loc, old_tok = int(slot_locs[v]), int(slot_tokens[v])
            if old_tok >= 0:
                hash_erase_reference(bank0, bank1, old_tok, v)
            slot_tokens[v] = tok
            if u < cap:
                slot_locs[v], scratch[u] = scratch[u], old_loc
            else:
                index[p] = (sigma << 32) | old_loc
                src = int(host_locs[tok])
                copy_items_reference(call.host_cache, call.device_buffer, [src], [old_loc],
                                     call.item_size_bytes)
                if plan is not None:
                    plan[0][b, u], plan[1][b, u] = src, old_loc
            inserts.append((v << 32) | tok)
        elif u >= cap:
            index[p] = (sigma << 32) | UNRESOLVED
            if plan is not None:
                plan[0][b, u], plan[1][b, u] = -1, -1  # no victim: nothing copied
    degraded |= hash_insert_reference(bank0, bank1, inserts)
    if overflow:
        direct = np.flatnonzero(locations <= -2)
        low = index[compact[-2 - locations[direct]].astype(np.int64) & COMPACT_POS_MASK] & MASK32
        locations[direct] = np.where(low == UNRESOLVED, -1, low)
    out[:] = locations
    scratch_state[0, COUNT_LAST * n + rid] = m
    scratch_state[0, COUNT_WORK * n + rid] = 0
    scratch_state[0, COUNT_UNION * n + rid] = 0
    scratch_state[0, COUNT_GEN * n + rid] = pack_generation(sigma, degraded)
    state.cache_policy[0, rid] = pack_clock(e_now, (cursor + min(m, hot)) % hot, cbits)
    if plan is not None:
        plan[2][b] = m


def load_cache_to_device_buffer_spec_mla_reference(
        *, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, state, num_real_reqs,
        miss_src=None, miss_dst=None, miss_count=None, item_size_bytes=None,
        checks="full") -> None:
    """NumPy oracle of the launcher (same keywords; NumPy arrays; mutates them in place).

    Shapes/dtypes: see the launcher. Written per request, per occurrence, for clarity.
    """
    call = check_speculative(
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens, host_cache_locs=host_cache_locs,
        device_buffer_locs=device_buffer_locs, host_cache=host_cache, device_buffer=device_buffer,
        top_k_device_locs=top_k_device_locs, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
        state=state, num_real_reqs=num_real_reqs, miss_src=miss_src, miss_dst=miss_dst,
        miss_count=miss_count, item_size_bytes=item_size_bytes,
        checks=checks)
    real = int(num_real_reqs[0])
    for b in range(call.batch):
        if b < real:
            request_reference(call, b)
        else:
            top_k_device_locs[b] = 0
            if call.record:
                miss_count[b] = 0
