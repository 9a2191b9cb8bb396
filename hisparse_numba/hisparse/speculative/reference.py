"""NumPy reference (the oracle) of the speculative swap-in, ``load_cache_to_device_buffer_spec_mla``.

Same keywords as the launcher (``launch.py``: shapes and dtypes), on NumPy arrays, mutated in
place; written per request and per occurrence, in the order of docs/hisparse-speculative.md:
classify every occurrence, number the unique misses, copy them into scratch, then commit (mode,
admission, victims, promotion, hash, direct overflow, counters). The kernel (``kernel.py``)
must equal it on every output and state array. Lessons 01, 03, 04 and 08 run it beside the kernel.
"""

from __future__ import annotations

import numpy as np

from ..spec_hash import (MASK32, hash_erase_reference, hash_insert_reference,
                         hash_lookup_reference, knuth_hash)
from ..spec_state import (ADMIT_BIT, CLAIM_BIT, CLOCK_VICTIM_SAMPLES, COMPACT_POS_MASK, COUNT_GEN,
                          COUNT_LAST, COUNT_UNION, COUNT_WORK, UNRESOLVED, approximate_candidate,
                          cursor_bits, epoch_bits, next_epoch, next_sigma, pack_clock,
                          pack_generation)
from .checks import SpecCall, check_speculative


def table_home(token, t):
    return int(knuth_hash(token)) % t


def table_insert_reference(table, sigma, token) -> None:
    """Ordered linear-probing insert (module docstring); entries of other epochs count as empty."""
    t = table.shape[0]
    v = (sigma << 32) | token
    p = table_home(token, t)
    while True:
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


def copy_item_reference(host_cache, device_buffer, src, dst, item) -> None:
    hb = host_cache.reshape(-1).view(np.uint8)
    db = device_buffer.reshape(-1).view(np.uint8)
    db[dst * item:(dst + 1) * item] = hb[src * item:(src + 1) * item]


def classify_reference(token, seq_len, slot_tokens, slot_locs, host_locs, hot, tail, bank0, bank1,
                       degraded):
    """('invalid'|'tail'|'hot'|'miss'|'unbacked', value) of one occurrence of a request whose
    device-buffer rows are ``slot_tokens`` / ``slot_locs`` and host-location row ``host_locs``;
    value = the tail location, the hot slot or the host location."""
    if token < 0 or token >= seq_len:
        return "invalid", -1
    if tail > 0 and token >= seq_len - tail:
        for c in range(hot, hot + tail):
            if slot_tokens[c] == token and slot_locs[c] >= 0:
                return "tail", int(slot_locs[c])
    slot = hash_lookup_reference(bank0, bank1, slot_tokens, token, hot, degraded)
    if slot >= 0:
        return "hot", slot
    src = int(host_locs[token])
    return ("miss", src) if src >= 0 else ("unbacked", -1)


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


def request_reference(call: SpecCall, b: int) -> None:
    """Gather and commit of real row ``b``, one occurrence at a time."""
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
    locations = np.full(t, -1, dtype=np.int64)
    union_hits = 0
    miss_occ = []
    for occ in range(t):
        tok = int(tokens[occ])
        kind, val = classify_reference(tok, int(seq_lens[b * steps + occ // top_k]), slot_tokens,
                                       slot_locs, host_locs, hot, tail, bank0, bank1, degraded)
        if kind == "tail":
            locations[occ] = val
        elif kind == "hot":
            locations[occ] = slot_locs[val]
            if ref[val] != e_now:
                ref[val] = e_now
                union_hits += 1
        elif kind == "miss":
            miss_occ.append(occ)
            table_insert_reference(table, sigma, tok)
    unique_idx = {}
    for occ in miss_occ:
        tok = int(tokens[occ])
        if tok not in unique_idx:
            u = unique_idx[tok] = len(unique_idx)
            p = table_find_reference(table, sigma, tok)
            index[p] = (sigma << 32) | u
            compact[u] = p
    m = len(unique_idx)
    for occ in miss_occ:
        u = unique_idx[int(tokens[occ])]
        locations[occ] = scratch[u] if u < cap else -2 - u
    for tok, u in unique_idx.items():
        if u < cap and scratch[u] >= 0:
            src = int(host_locs[tok])
            copy_item_reference(call.host_cache, call.device_buffer, src, int(scratch[u]), call.item_size_bytes)
            if plan is not None:
                plan[0][b, u], plan[1][b, u] = src, scratch[u]
        elif u < cap and plan is not None:
            plan[0][b, u], plan[1][b, u] = -1, -1      # nothing copied (checks="shapes" only)

    # ---- commit: mode, admission, victims, promotion, hash, overflow fix-up
    overflow = m > cap
    n_over = m - cap if overflow else 0
    union_mode = m + union_hits <= hot
    if not union_mode:
        if not overflow:
            ref[:hot] = 0
        claimed = set()
        for occ in range((steps - 1) * top_k, t):
            tok = int(tokens[occ])
            kind, val = classify_reference(tok, int(seq_lens[b * steps + steps - 1]), slot_tokens,
                                           slot_locs, host_locs, hot, tail, bank0, bank1, degraded)
            if kind == "hot":
                ref[val] = e_now
            elif kind == "miss" and unique_idx[tok] < cap:
                claimed.add(unique_idx[tok])
        budget = hot if not overflow else max(0, hot - union_hits - n_over)
        for ordinal, u in enumerate(sorted(claimed)):
            compact[u] |= CLAIM_BIT | (ADMIT_BIT if ordinal < budget else 0)

    def needs_victim(u):
        if u >= cap:
            return True
        return scratch[u] >= 0 and (union_mode or (compact[u] & ADMIT_BIT) != 0)

    need = [u for u in range(m) if needs_victim(u)]
    num_victims = len(need)
    if union_mode:
        victims = [union_victim_reference(ref, u, m, cursor, hot, e_now, ebits) for u in need]
        for v in victims:
            if v >= 0:
                ref[v] = e_now
    else:
        victims = approximate_victims_reference(ref, need, m, cap, hot, e_now)
    fallback = [i for i in range(num_victims) if victims[i] < 0]
    if fallback:
        free = [(cursor + r) % hot for r in range(hot) if ref[(cursor + r) % hot] != e_now]
        for i, slot in zip(fallback, free):
            victims[i] = slot
            ref[slot] = e_now
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
                copy_item_reference(call.host_cache, call.device_buffer, src, old_loc, call.item_size_bytes)
                if plan is not None:
                    plan[0][b, u], plan[1][b, u] = src, old_loc
            inserts.append((v << 32) | tok)
        elif u >= cap:
            index[p] = (sigma << 32) | UNRESOLVED
            if plan is not None:
                plan[0][b, u], plan[1][b, u] = -1, -1  # no victim: nothing copied
    degraded |= hash_insert_reference(bank0, bank1, inserts)
    if overflow:
        for occ in range(t):
            if locations[occ] <= -2:
                p = int(compact[-2 - locations[occ]]) & COMPACT_POS_MASK
                low = int(index[p]) & MASK32
                locations[occ] = -1 if low == UNRESOLVED else low
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
    call = check_speculative(**locals())
    real = int(num_real_reqs[0])
    for b in range(call.batch):
        if b < real:
            request_reference(call, b)
        else:
            top_k_device_locs[b] = 0
            if call.record:
                miss_count[b] = 0
