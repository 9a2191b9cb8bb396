"""Speculative (multi-step) HiSparse swap-in: ``load_cache_to_device_buffer_spec_mla``.

Speculative decoding produces ``steps`` top-k selections per request (one per draft/verify row,
each with its own sequence length). This launcher resolves all ``T = steps * top_k`` occurrences
of a request in one launch pair and writes one physical device location per occurrence into
``top_k_device_locs[batch, steps, top_k]``. State layout: ``spec_state.py``.

Per occurrence ``occ = step * top_k + k`` of a real row (``b < num_real_reqs[0]``), in order:

1. token < 0 or token >= ``seq_lens[b * steps + step]``: output -1.
2. Active tail: if token >= seq_len - tail (tail = row width - H), the first tail column
   ``c in [H, H + tail)`` with ``device_buffer_tokens == token`` and a location >= 0 serves it.
   No host IO, no state change: this is how draft tokens that are not backed up are served.
3. Hot lookup: positional fast path (``token < H`` and slot ``token`` holds it), bank 0, bank 1,
   and a linear scan of the H slots once the request's hash is HASH_DEGRADED. A hit outputs the
   slot's location and stamps the slot's reference epoch with this call's epoch E; the number of
   distinct stamped slots is the union-hit count.
4. Miss: ``host_cache_locs[rid, token] < 0`` gives -1. Otherwise the token is a *unique miss*,
   deduplicated across all steps: every occurrence of it gets the same location.

Deterministic choices (sglang decides these by atomic races; here they are defined, and the
reference follows the same definitions, so kernel == reference on every output and state array):

* Unique-miss numbering: ``unique_idx`` = rank of the token's *first occurrence* among the first
  occurrences of all missed tokens, in occurrence order (a block scan per tile plus the counts of
  the earlier tiles, see Launch geometry).
* Scratch table: an *ordered* linear-probing set (Amble & Knuth): along a probe run, tokens are
  kept in decreasing order, and an insert displaces smaller tokens. Its final layout depends only
  on the set of tokens, not on the order the threads inserted them (lock-free with CAS,
  as in Shun & Blelloch's deterministic hash tables). Home position: ``Knuth(token) mod T``.
* Misses with ``unique_idx < capacity`` land in ``scratch_locs[rid, unique_idx]`` (copied once,
  by the tile that numbered it); the others are *direct-overflow* misses, resolved in commit.
* Victims (commit), for the misses that need a hot slot (docs/hisparse-speculative.md, "Victims"):
  in union mode miss ``u`` samples ``min(partition_size, 6)`` ring positions spread over its
  partition ``u, u + m, u + 2m, ... < H`` after the cursor (``m`` = unique misses,
  ``partition_size = (H - 1 - u) // m + 1``), skipping slots stamped E and taking the oldest
  ``(E - ref) mod 2^bits`` (first on ties). In approximate mode miss ``u`` walks
  ``approximate_candidate(linear, E, H)`` for ``linear = u, u + m, ... < H`` (``u - cap`` and
  ``m - cap`` for a direct-overflow miss) and claims the first slot not stamped E; misses that
  want the same slot settle it in rounds, the smallest ``unique_idx`` first. The ones left
  without a victim take, in ``unique_idx`` order, the slots not stamped E in ring order from the
  cursor (prefix scans over both lists).
* Approximate-mode admission: last-step misses with ``unique_idx < capacity`` are claimed; the
  first ``budget`` of them in ``unique_idx`` order are admitted.
* Hash inserts: rounds in ordinal order (``spec_state.py`` docstring).

Commit, per real request: ``union mode`` when ``misses + union_hits <= H`` (every scratch miss
with a location is promoted), else the *approximate mode* (if there is no overflow all reference
epochs are cleared to 0; last-step hits are re-stamped E; only admitted misses are promoted;
budget = H, or ``max(0, H - union_hits - overflow)`` with overflow). Promotion swaps locations: the
victim slot takes the scratch location (bytes already there) and the scratch entry takes the
victim's old location (zero copy). A direct-overflow miss takes its victim in place: the item is
copied from host into the victim's location, which all of its occurrences then output (-1 when no
victim was found). An application needs a victim whose location is >= 0. The victim's old token
is erased from the hash, the new one inserted. Finally the CLOCK cursor advances by
``min(misses, H)``, the epoch becomes E, the generation sigma, and the counters are reset.

Padded rows (``b >= num_real_reqs[0]``) output 0 everywhere and ``miss_count[b] = 0``; nothing else.

Miss plan (optional): ``miss_src[b, u], miss_dst[b, u]`` = host location and device location of
unique miss ``u`` for every miss that was copied (scratch location >= 0, or a resolved direct
overflow); other entries are left untouched. ``miss_count[b]`` = number of unique misses.

Launch geometry. sglang splits the work into a launch pair (gather, then commit) because the commit
needs a grid-wide barrier. Here one launch does both, with a barrier per request instead, so that
a request's commit and every tile's host copies overlap:

* Grid ``(batch, tiles)`` x ``tile`` threads (``tile`` = 1024 on a GPU, 32 in the simulator so
  that small tests run several tiles). A tile takes its index ``y`` from a per-request ticket, so
  it only ever waits for tiles that started before it; thread ``i`` resolves occurrences
  ``(y * tile + i) * reps + r``, ``r < reps``.
* 1. Classify: outputs of non-misses, stamps (union counter), ordered scratch-table inserts, and a
  claim of every missed token in a private set whose positions never move (``claim_first`` keeps
  the token's smallest occurrence). Publish CLAIMED.
* 2. Once the earlier tiles have claimed, an occurrence is its token's first iff it is the claimed
  minimum. Count the tile's firsts (block scan), publish COUNTED, and add up the earlier tiles'
  counts (each earlier tile is waited for by its own thread): ``unique_idx = before + rank``.
* 3. Outputs of the first occurrences, plan entries and this tile's copy list (destinations are
  read now, before any commit can swap scratch locations). Publish NUMBERED.
* 4. A tile holding later occurrences of missed tokens waits for NUMBERED of the earlier tiles
  and gives them their first occurrence's location.
* 5. A tile arrives (threadfence, then a per-request arrival counter) with its NUMBERED, or after
  step 4 if it has one. The *finisher* indexes the scratch table, resets the request's workspace
  and commits (victims, promotion, hash, direct overflow). When every block fits on the SMs at
  once (``committer_tile``: batch 1 and 8 at sglang's sizes), each request has one more tile, the
  committer, which takes the last ticket, resolves nothing and finishes the request as soon as
  every tile has arrived, on an SM of its own. Otherwise the last tile to arrive finishes it,
  and copies its own list after that.
* 6. Every tile copies its listed scratch misses from the host pool.

The private buffers (tickets, flags, claims, copy lists) are ``Workspace``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .. import device
from ..checks import (check_dtype, check_inner_contiguous, check_item_copy, check_miss_plan,
                      check_ndim, fail, row_stride)
from ..device import cuda, jit_kernel
from ..blockscan import block_exclusive_scan
from ..itemcopy import copy_item, copy_items_flat
from .miss_plan import placeholder_plan
from .spec_state import (ADMIT_BIT, CLAIM_BIT, CLOCK_VICTIM_SAMPLES, COMPACT_POS_MASK, COUNT_GEN,
                         COUNT_LAST, COUNT_UNION, COUNT_WORK, MASK32, MAX_OCCURRENCES,
                         approximate_candidate, approximate_candidate_dev, knuth_hash,
                         knuth_hash_dev,
                         check_state, cursor_bits, epoch_bits, hash_erase_dev, hash_erase_reference,
                         hash_insert_dev, hash_insert_reference, hash_lookup_dev,
                         hash_lookup_reference, next_epoch, next_epoch_dev, next_sigma,
                         next_sigma_dev, pack_clock, pack_generation)

LANES = 32
MAX_THREADS = 1024
UNRESOLVED = MASK32
EMPTY_KEY = -1                  # an empty cell of the private claim set
NO_OCCURRENCE = 0x7FFFFFFF      # claim_first of a cell no occurrence has claimed yet
PROPOSED = -0x80000000          # + unique_idx: a slot's epoch while misses propose it (approximate mode)
CLAIMED, COUNTED, NUMBERED = 0, 1, 2   # the stages a tile publishes (Workspace.flags)


def steps_message(num_steps) -> str:
    return f"HiSparse speculative swap requires 2-4 steps, got {num_steps}."


def plan_shape_message(plan_capacity) -> str:
    return (f"speculative miss_src/miss_dst must have shape [batch, >= steps * top_k] "
            f"(capacity {plan_capacity}).")


COUNT_MESSAGE = "speculative miss_count must have shape [batch]."


class SpecConfig(NamedTuple):
    batch: int
    steps: int
    top_k: int
    hot: int
    tail: int
    num_requests: int
    capacity: int
    item_size_bytes: int
    record: bool


# ---------------------------------------------------------------------------------------------
# Validation (launcher and reference)

def check_speculative(*, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                      host_cache, device_buffer, top_k_device_locs, req_pool_indices, seq_lens,
                      state, num_real_reqs, miss_src, miss_dst, miss_count,
                      item_size_bytes, for_kernel: bool = False) -> SpecConfig:
    """Every check of the launcher, before anything is launched or written (ValueError).

    ``for_kernel`` adds the memory-kind checks of a GPU launch (mapped host pool, device
    buffers); the NumPy reference takes host arrays in both worlds.
    """
    if getattr(top_k_tokens, "ndim", 0) != 3:
        fail(f"speculative top_k_tokens must have shape [batch, steps, top_k], got shape "
             f"{tuple(getattr(top_k_tokens, 'shape', ()))}")
    batch, steps, top_k = (int(x) for x in top_k_tokens.shape)
    if not 2 <= steps <= 4:
        fail(steps_message(steps))
    t = steps * top_k
    record = check_miss_plan(miss_src, miss_dst, miss_count, batch=batch, capacity=t,
                             shape_message=plan_shape_message(t), count_message=COUNT_MESSAGE)
    if top_k <= 0 or t > MAX_OCCURRENCES:
        fail(f"speculative swap needs 0 < steps * top_k <= {MAX_OCCURRENCES}, got {steps} * {top_k}")
    n, hot, _, cap = check_state(state, num_occurrences=t)
    if not state.scratch_state.flags.c_contiguous:
        fail("state.scratch_state must be C-contiguous (its metadata rows are read as int64 words)")
    check_dtype("top_k_tokens", top_k_tokens, np.int32)
    check_ndim("top_k_device_locs", top_k_device_locs, 3, f"[batch, steps, top_k] = [{batch}, {steps}, {top_k}]")
    check_dtype("top_k_device_locs", top_k_device_locs, np.int32)
    if tuple(top_k_device_locs.shape) != (batch, steps, top_k):
        fail(f"top_k_device_locs must have shape [batch, steps, top_k] = [{batch}, {steps}, {top_k}], "
             f"got shape {tuple(top_k_device_locs.shape)}")
    for name, a in (("top_k_tokens", top_k_tokens), ("top_k_device_locs", top_k_device_locs)):
        if a.strides[2] != 4 or a.strides[1] != 4 * top_k:
            fail(f"{name} rows must be dense over (steps, top_k), got strides {tuple(a.strides)} bytes")
    for name, a in (("device_buffer_tokens", device_buffer_tokens), ("device_buffer_locs", device_buffer_locs)):
        check_ndim(name, a, 2, "[num_requests, H + tail]")
        check_dtype(name, a, np.int32)
        check_inner_contiguous(name, a)
        if a.shape[0] < n or a.shape[1] < hot:
            fail(f"{name} must have shape [>= {n}, >= hot_buffer_size {hot}], got {tuple(a.shape)}")
    if device_buffer_locs.shape != device_buffer_tokens.shape or \
            row_stride(device_buffer_locs) != row_stride(device_buffer_tokens):
        fail(f"device_buffer_locs must have the shape and row stride of device_buffer_tokens, got "
             f"{tuple(device_buffer_locs.shape)} / {row_stride(device_buffer_locs)} and "
             f"{tuple(device_buffer_tokens.shape)} / {row_stride(device_buffer_tokens)}")
    check_ndim("host_cache_locs", host_cache_locs, 2, "[num_requests, max_positions]")
    check_dtype("host_cache_locs", host_cache_locs, np.int64)
    if host_cache_locs.shape[0] < n or row_stride(host_cache_locs) != host_cache_locs.shape[1] or \
            host_cache_locs.shape[1] > 2 ** 31:
        fail(f"host_cache_locs must be row-contiguous [>= {n}, <= 2^31] int64, got shape "
             f"{tuple(host_cache_locs.shape)} strides {tuple(host_cache_locs.strides)}")
    check_ndim("req_pool_indices", req_pool_indices, 1, f"[batch] = [{batch}]")
    check_dtype("req_pool_indices", req_pool_indices, np.int64)
    if req_pool_indices.shape[0] != batch or not req_pool_indices.flags.c_contiguous:
        fail(f"req_pool_indices must have shape [batch] = [{batch}] int64 (contiguous), got {tuple(req_pool_indices.shape)}")
    check_ndim("seq_lens", seq_lens, 1, f"[batch * steps] = [{batch * steps}]")
    check_dtype("seq_lens", seq_lens, np.int32)
    if seq_lens.shape[0] != batch * steps or not seq_lens.flags.c_contiguous:
        fail(f"seq_lens must have shape [batch * steps] = [{batch * steps}] int32 (one length per "
             f"step, contiguous), got shape {tuple(seq_lens.shape)}")
    check_ndim("num_real_reqs", num_real_reqs, 1, "[>= 1]")
    check_dtype("num_real_reqs", num_real_reqs, np.int32)
    if num_real_reqs.shape[0] < 1:
        fail("num_real_reqs must have at least one element")
    for name, a in (("host_cache", host_cache), ("device_buffer", device_buffer)):
        if not a.flags.c_contiguous:
            fail(f"{name} must be C-contiguous, got strides {tuple(a.strides)} bytes")
    if for_kernel and device.backend() == "cuda":
        if not device.is_mapped(host_cache):
            fail("host_cache must be device-readable host memory (device.host_cache_array), "
                 f"got {type(host_cache).__name__}")
        if not isinstance(device_buffer, device.xp.ndarray):
            fail(f"device_buffer must be a device array, got {type(device_buffer).__name__}")
    if item_size_bytes is None:
        item_size_bytes = int(host_cache.strides[0]) if host_cache.ndim else 0
    item_size_bytes = int(item_size_bytes)
    check_item_copy(item_size_bytes, host_cache, device_buffer)
    return SpecConfig(batch, steps, top_k, hot, int(device_buffer_tokens.shape[1]) - hot, n, cap,
                      item_size_bytes, record)


# ---------------------------------------------------------------------------------------------
# Reference (the oracle)

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


def _copy_item_reference(host_cache, device_buffer, src, dst, item) -> None:
    hb = host_cache.reshape(-1).view(np.uint8)
    db = device_buffer.reshape(-1).view(np.uint8)
    db[dst * item:(dst + 1) * item] = hb[src * item:(src + 1) * item]


def _classify_reference(tok, seq_len, dbt, dbl, hcl_row, cfg, bank0, bank1, degraded):
    """('invalid'|'tail'|'hot'|'miss'|'unbacked', value): value = location, slot or host loc."""
    if tok < 0 or tok >= seq_len:
        return "invalid", -1
    if cfg.tail > 0 and tok >= seq_len - cfg.tail:
        for c in range(cfg.hot, cfg.hot + cfg.tail):
            if dbt[c] == tok and dbl[c] >= 0:
                return "tail", int(dbl[c])
    slot = hash_lookup_reference(bank0, bank1, dbt, tok, cfg.hot, degraded)
    if slot >= 0:
        return "hot", slot
    src = int(hcl_row[tok])
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


def _request_reference(b, cfg, *, top_k_tokens, device_buffer_tokens, host_cache_locs,
                       device_buffer_locs, host_cache, device_buffer, top_k_device_locs,
                       req_pool_indices, seq_lens, state, plan):
    steps, k_, hot, n, cap = cfg.steps, cfg.top_k, cfg.hot, cfg.num_requests, cfg.capacity
    t = steps * k_
    rid = int(req_pool_indices[b])
    dbt, dbl, hcl_row = device_buffer_tokens[rid], device_buffer_locs[rid], host_cache_locs[rid]
    bank0, bank1 = state.cache_index[rid, 0], state.cache_index[rid, 1]
    ref = state.cache_policy[rid + 1]
    scratch = state.scratch_locs[rid]
    ss = state.scratch_state
    meta = ss[rid + 1, :4 * t].view(np.int64)
    table, index, compact = meta[:t], meta[t:2 * t], ss[rid + 1, 4 * t:5 * t]
    cbits, ebits = cursor_bits(hot), epoch_bits(hot)
    packed = int(state.cache_policy[0, rid])
    e_now = next_epoch(packed, cbits, ebits)
    cursor = (packed & MASK32) & ((1 << cbits) - 1)
    gen = int(ss[0, COUNT_GEN * n + rid])
    degraded = gen < 0
    sigma = next_sigma(gen)
    tokens = top_k_tokens[b].reshape(t)
    out = top_k_device_locs[b].reshape(t)

    # ---- gather: classify every occurrence, deduplicate misses, copy each unique miss once
    res = np.full(t, -1, dtype=np.int64)
    union_hits = 0
    miss_occ = []
    for occ in range(t):
        tok = int(tokens[occ])
        kind, val = _classify_reference(tok, int(seq_lens[b * steps + occ // k_]), dbt, dbl,
                                        hcl_row, cfg, bank0, bank1, degraded)
        if kind == "tail":
            res[occ] = val
        elif kind == "hot":
            res[occ] = dbl[val]
            if ref[val] != e_now:
                ref[val] = e_now
                union_hits += 1
        elif kind == "miss":
            miss_occ.append(occ)
            table_insert_reference(table, sigma, tok)
    uidx = {}
    for occ in miss_occ:
        tok = int(tokens[occ])
        if tok not in uidx:
            u = uidx[tok] = len(uidx)
            p = table_find_reference(table, sigma, tok)
            index[p] = (sigma << 32) | u
            compact[u] = p
    m = len(uidx)
    for occ in miss_occ:
        u = uidx[int(tokens[occ])]
        res[occ] = scratch[u] if u < cap else -2 - u
    for tok, u in uidx.items():
        if u < cap and scratch[u] >= 0:
            src = int(hcl_row[tok])
            _copy_item_reference(host_cache, device_buffer, src, int(scratch[u]), cfg.item_size_bytes)
            if plan is not None:
                plan[0][b, u], plan[1][b, u] = src, scratch[u]

    # ---- commit: mode, admission, victims, promotion, hash, overflow fix-up
    overflow = m > cap
    n_over = m - cap if overflow else 0
    union_mode = m + union_hits <= hot
    if not union_mode:
        if not overflow:
            ref[:hot] = 0
        claimed = set()
        for occ in range((steps - 1) * k_, t):
            tok = int(tokens[occ])
            kind, val = _classify_reference(tok, int(seq_lens[b * steps + steps - 1]), dbt, dbl,
                                            hcl_row, cfg, bank0, bank1, degraded)
            if kind == "hot":
                ref[val] = e_now
            elif kind == "miss" and uidx[tok] < cap:
                claimed.add(uidx[tok])
        budget = hot if not overflow else max(0, hot - union_hits - n_over)
        for ordinal, u in enumerate(sorted(claimed)):
            compact[u] |= CLAIM_BIT | (ADMIT_BIT if ordinal < budget else 0)

    def needs_victim(u):
        if u >= cap:
            return True
        return scratch[u] >= 0 and (union_mode or (compact[u] & ADMIT_BIT) != 0)

    need = [u for u in range(m) if needs_victim(u)]
    mv = len(need)
    if union_mode:
        victims = [union_victim_reference(ref, u, m, cursor, hot, e_now, ebits) for u in need]
        for v in victims:
            if v >= 0:
                ref[v] = e_now
    else:
        victims = approximate_victims_reference(ref, need, m, cap, hot, e_now)
    fallback = [i for i in range(mv) if victims[i] < 0]
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
        if v >= 0 and dbl[v] >= 0:
            old_loc, old_tok = int(dbl[v]), int(dbt[v])
            if old_tok >= 0:
                hash_erase_reference(bank0, bank1, old_tok, v)
            dbt[v] = tok
            if u < cap:
                dbl[v], scratch[u] = scratch[u], old_loc
            else:
                index[p] = (sigma << 32) | old_loc
                src = int(hcl_row[tok])
                _copy_item_reference(host_cache, device_buffer, src, old_loc, cfg.item_size_bytes)
                if plan is not None:
                    plan[0][b, u], plan[1][b, u] = src, old_loc
            inserts.append((v << 32) | tok)
        elif u >= cap:
            index[p] = (sigma << 32) | UNRESOLVED
    degraded |= hash_insert_reference(bank0, bank1, inserts)
    if overflow:
        for occ in range(t):
            if res[occ] <= -2:
                p = int(compact[-2 - res[occ]]) & COMPACT_POS_MASK
                low = int(index[p]) & MASK32
                res[occ] = -1 if low == UNRESOLVED else low
    out[:] = res
    ss[0, COUNT_LAST * n + rid] = m
    ss[0, COUNT_WORK * n + rid] = 0
    ss[0, COUNT_UNION * n + rid] = 0
    ss[0, COUNT_GEN * n + rid] = pack_generation(sigma, degraded)
    state.cache_policy[0, rid] = pack_clock(e_now, (cursor + min(m, hot)) % hot, cbits)
    if plan is not None:
        plan[2][b] = m


def load_cache_to_device_buffer_spec_mla_reference(
        *, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, state, num_real_reqs,
        miss_src=None, miss_dst=None, miss_count=None, item_size_bytes=None) -> None:
    """NumPy oracle of the launcher (same keywords; NumPy arrays; mutates them in place).

    Shapes/dtypes: see the launcher. Written per request, per occurrence, for clarity.
    """
    cfg = check_speculative(**locals())
    plan = (miss_src, miss_dst, miss_count) if cfg.record else None
    real = int(num_real_reqs[0])
    arrays = dict(top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
                  host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
                  host_cache=host_cache, device_buffer=device_buffer,
                  top_k_device_locs=top_k_device_locs, req_pool_indices=req_pool_indices,
                  seq_lens=seq_lens, state=state)
    for b in range(cfg.batch):
        if b >= real:
            top_k_device_locs[b] = 0
            if plan is not None:
                miss_count[b] = 0
            continue
        _request_reference(b, cfg, plan=plan, **arrays)


# ---------------------------------------------------------------------------------------------
# Kernels

@cuda.jit(device=True, inline=True)
def load_coherent(array, index):
    """``array[index]`` as other blocks of this launch left it: an atomic add of zero, served by
    L2. A plain load may be served by this SM's L1, which other SMs' writes and atomics do not
    update."""
    return cuda.atomic.add(array, index, 0)


@cuda.jit(device=True, inline=True)
def table_insert_dev(meta64, row, t, sigma, token):
    """Lock-free ordered insert. A cell only grows during a launch, so a stale read is harmless:
    the CAS returns the true value and the loop goes on from it."""
    v = (sigma << 32) | token
    p = knuth_hash_dev(token) % t
    c = meta64[row, p]
    while True:
        if (c >> 32) != sigma or v > c:
            old = cuda.atomic.cas(meta64, (row, p), c, v)
            if old == c:
                if (c >> 32) != sigma:
                    return
                v = c
                p = (p + 1) % t
                c = meta64[row, p]
            else:
                c = old
        elif c == v:
            return
        else:
            p = (p + 1) % t
            c = meta64[row, p]


@cuda.jit(device=True, inline=True)
def table_find_dev(meta64, row, t, sigma, token):
    v = (sigma << 32) | token
    p = knuth_hash_dev(token) % t
    for _ in range(t):
        if load_coherent(meta64, (row, p)) == v:
            return p
        p = (p + 1) % t
    return -1


@cuda.jit(device=True, inline=True)
def classify_dev(top_k_tokens, seq_lens, dbt, dbl, hcl, cache_index, b, rid, occ, top_k, steps,
                 hot, tail, degraded):
    """Returns (kind, value, token): kind 0 invalid/unbacked (-1), 1 tail (loc), 2 hot (slot),
    3 miss (host loc)."""
    s = occ // top_k
    tok = np.int64(top_k_tokens[b, s, occ - s * top_k])
    seq_len = np.int64(seq_lens[b * steps + s])
    if tok < 0 or tok >= seq_len:
        return 0, np.int64(-1), tok
    if tail > 0 and tok >= seq_len - tail:
        for c in range(hot, hot + tail):
            if dbt[rid, c] == tok and dbl[rid, c] >= 0:
                return 1, np.int64(dbl[rid, c]), tok
    slot = hash_lookup_dev(cache_index, rid, dbt, tok, hot, degraded)
    if slot >= 0:
        return 2, np.int64(slot), tok
    src = hcl[rid, tok]
    if src >= 0:
        return 3, src, tok
    return 0, np.int64(-1), tok




@cuda.jit(device=True, inline=True)
def claim_token(claim_keys, b, token):
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
def publish(flags, b, stage, tile_id, value, tid):
    """Make this tile's writes visible, then set ``flags[b, stage, tile_id] = value`` (> 0)."""
    cuda.threadfence()
    cuda.syncthreads()
    if tid == 0:
        cuda.atomic.exch(flags, (b, stage, tile_id), np.int32(value))


@cuda.jit(device=True, inline=True)
def wait_for_tiles(flags, b, stage, num_tiles, tid, num_threads):
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


@functools.cache
def _kernels(steps: int, top_k: int, hot: int, tile: int, reps: int, committer: bool,
             record: bool):
    """The swap kernel for one compile-time configuration: blocks (tiles) of ``tile`` threads,
    each thread resolving ``reps`` consecutive occurrences, plus one committer tile per request
    when ``committer``."""
    t = steps * top_k
    tiles = -(-t // (tile * reps))      # tiles per request
    warps = tile // LANES
    cbits, ebits = cursor_bits(hot), epoch_bits(hot)
    cmask, emask = (1 << cbits) - 1, (1 << ebits) - 1

    @cuda.jit(device=True, inline=True)
    def needs_victim(ss, scratch_locs, rid, row, u, cap, union_mode):
        if u >= cap:
            return True
        if scratch_locs[rid, u] < 0:
            return False
        return union_mode or (ss[row, 4 * t + u] & ADMIT_BIT) != 0

    @cuda.jit(device=True, inline=True)
    def commit_request(top_k_tokens, dbt, hcl, dbl, host_words, dev_words, out, seq_lens,
                       cache_index, cache_policy, scratch_locs, ss, meta64, miss_src, miss_dst,
                       miss_count, words_per_item, tail, n, b, rid, tid, vict, aux, scan, flag):
        """Commit of request ``b`` by one whole tile, once every tile of the request has arrived
        (mode, admission, victims, promotion, hash, direct overflow, counters)."""
        row = rid + 1
        cap = scratch_locs.shape[1]
        packed = np.int64(cache_policy[0, rid])
        e_now = next_epoch_dev(packed, cbits, ebits)
        cursor = (packed & 0xFFFFFFFF) & cmask
        gen = np.int64(ss[0, 3 * n + rid])
        degraded = gen < 0
        sigma = next_sigma_dev(gen)
        m = np.int64(load_coherent(ss, (0, n + rid)))
        union_hits = np.int64(load_coherent(ss, (0, 2 * n + rid)))
        overflow = m > cap
        union_mode = m + union_hits <= hot
        if tid == 0:
            flag[0] = 0
        if not union_mode:
            if not overflow:
                i = tid
                while i < hot:
                    cache_policy[row, i] = 0
                    i += tile
                cuda.syncthreads()
            k = tid
            while k < top_k:
                kind, val, tok = classify_dev(top_k_tokens, seq_lens, dbt, dbl, hcl, cache_index,
                                              b, rid, (steps - 1) * top_k + k, top_k, steps, hot,
                                              tail, degraded)
                if kind == 2:
                    cache_policy[row, val] = e_now
                elif kind == 3:
                    p = table_find_dev(meta64, row, t, sigma, tok)
                    u = meta64[row, t + p] & 0xFFFFFFFF
                    if u < cap:
                        cuda.atomic.or_(ss, (row, 4 * t + u), np.int32(CLAIM_BIT))
                k += tile
            cuda.syncthreads()
            budget = np.int64(hot)
            if overflow:
                budget = max(np.int64(0), hot - union_hits - (m - cap))
            lim = min(m, cap)
            chunk = (lim + tile - 1) // tile
            u0 = min(lim, tid * chunk)
            u1 = min(lim, u0 + chunk)
            count = 0
            for u in range(u0, u1):
                if ss[row, 4 * t + u] & CLAIM_BIT:
                    count += 1
            base, _ = block_exclusive_scan(scan, count, tid, tile)
            for u in range(u0, u1):
                if ss[row, 4 * t + u] & CLAIM_BIT:
                    if base < budget:
                        ss[row, 4 * t + u] |= ADMIT_BIT
                    base += 1
            cuda.syncthreads()
        # ordinals of the misses that need a victim
        chunk = (m + tile - 1) // tile
        u0 = min(m, tid * chunk)
        u1 = min(m, u0 + chunk)
        count = 0
        for u in range(u0, u1):
            if needs_victim(ss, scratch_locs, rid, row, u, cap, union_mode):
                count += 1
        base, mv = block_exclusive_scan(scan, count, tid, tile)
        if union_mode:
            # sampled CLOCK: miss u samples its own partition of the ring (disjoint between misses)
            i = base
            for u in range(u0, u1):
                if needs_victim(ss, scratch_locs, rid, row, u, cap, union_mode):
                    partition_size = (hot - 1 - u) // m + 1
                    sample_count = min(partition_size, CLOCK_VICTIM_SAMPLES)
                    best = -1
                    best_age = np.int64(-1)
                    for sample in range(sample_count):
                        slot = (cursor + u + (sample * partition_size // sample_count) * m) % hot
                        r = np.int64(load_coherent(cache_policy, (row, slot)))
                        if r != e_now:
                            age = (e_now - r) & emask
                            if age > best_age:
                                best = slot
                                best_age = age
                    vict[i] = best
                    if best >= 0:
                        cache_policy[row, best] = e_now
                    i += 1
        else:
            # approximate mode: walks in rounds. aux[i] is where miss i's walk stands (-1: ended).
            # A proposal writes PROPOSED + unique_idx into the slot's epoch with atomic.min, so the
            # smallest unique_idx wins; the winner then stamps E.
            i = base
            for u in range(u0, u1):
                if needs_victim(ss, scratch_locs, rid, row, u, cap, union_mode):
                    vict[i] = -1
                    linear = u - cap if u >= cap else u
                    aux[i] = linear if linear < hot else -1
                    i += 1
            for _ in range(t + 1):       # every round settles a miss or ends with no proposal
                cuda.syncthreads()
                if tid == 0:
                    flag[1] = 0
                cuda.syncthreads()
                i = base
                for u in range(u0, u1):
                    if needs_victim(ss, scratch_locs, rid, row, u, cap, union_mode):
                        if vict[i] < 0 and aux[i] >= 0:
                            stride = m - cap if u >= cap else m
                            linear = np.int64(aux[i])
                            while linear < hot and load_coherent(
                                    cache_policy, (row, approximate_candidate_dev(linear, e_now, hot))) == e_now:
                                linear += stride
                            if linear < hot:
                                aux[i] = linear
                                cuda.atomic.min(cache_policy, (row, approximate_candidate_dev(linear, e_now, hot)),
                                                np.int32(PROPOSED + u))
                                flag[1] = 1
                            else:
                                aux[i] = -1
                        i += 1
                cuda.syncthreads()
                if flag[1] == 0:
                    break
                i = base
                for u in range(u0, u1):
                    if needs_victim(ss, scratch_locs, rid, row, u, cap, union_mode):
                        if vict[i] < 0 and aux[i] >= 0:
                            slot = approximate_candidate_dev(np.int64(aux[i]), e_now, hot)
                            if load_coherent(cache_policy, (row, slot)) == PROPOSED + u:
                                vict[i] = slot
                                cache_policy[row, slot] = e_now
                        i += 1
        cuda.syncthreads()
        # fallback: the k-th miss without a victim takes the k-th unstamped slot in ring order
        fcount = 0
        for i in range(base, base + count):
            if vict[i] < 0:
                fcount += 1
        fbase, nfall = block_exclusive_scan(scan, fcount, tid, tile)
        for i in range(base, base + count):
            if vict[i] < 0:
                aux[fbase] = i
                fbase += 1
        cuda.syncthreads()
        if nfall > 0:
            hchunk = (hot + tile - 1) // tile
            r0 = min(hot, tid * hchunk)
            r1 = min(hot, r0 + hchunk)
            free = 0
            for r in range(r0, r1):
                if load_coherent(cache_policy, (row, (cursor + r) % hot)) != e_now:
                    free += 1
            rank, _ = block_exclusive_scan(scan, free, tid, tile)
            for r in range(r0, r1):
                slot = (cursor + r) % hot
                if load_coherent(cache_policy, (row, slot)) != e_now:
                    if rank < nfall:
                        vict[aux[rank]] = slot
                        cache_policy[row, slot] = e_now
                    rank += 1
            cuda.syncthreads()
        # apply: zero-copy promotion or in-place direct overflow; erase the evicted tokens
        i = base
        for u in range(u0, u1):
            if needs_victim(ss, scratch_locs, rid, row, u, cap, union_mode):
                v = np.int64(vict[i])
                p = ss[row, 4 * t + u] & COMPACT_POS_MASK
                tok = load_coherent(meta64, (row, p)) & 0xFFFFFFFF
                applied = False
                if v >= 0:
                    old_loc = dbl[rid, v]
                    if old_loc >= 0:
                        old_tok = np.int64(dbt[rid, v])
                        if old_tok >= 0:
                            hash_erase_dev(cache_index, rid, old_tok, v)
                        dbt[rid, v] = tok
                        if u < cap:
                            dbl[rid, v] = scratch_locs[rid, u]
                            scratch_locs[rid, u] = old_loc
                        else:
                            meta64[row, t + p] = (sigma << 32) | old_loc
                        applied = True
                if not applied:
                    vict[i] = -1
                    if u >= cap:
                        meta64[row, t + p] = (sigma << 32) | 0xFFFFFFFF
                i += 1
        cuda.syncthreads()
        warp = tid // LANES
        lane = tid % LANES
        if overflow:
            u = cap + warp
            while u < m:
                p = ss[row, 4 * t + u] & COMPACT_POS_MASK
                dst = meta64[row, t + p] & 0xFFFFFFFF
                if dst != 0xFFFFFFFF:
                    src = hcl[rid, load_coherent(meta64, (row, p)) & 0xFFFFFFFF]
                    copy_item(host_words, src, dev_words, dst, words_per_item, lane, LANES)
                    if record and lane == 0:
                        miss_src[b, u] = src
                        miss_dst[b, u] = dst
                u += warps
        hash_insert_dev(cache_index, rid, dbt, vict, mv, aux, flag, scan, tid, tile)
        if overflow:
            occ = tid
            while occ < t:
                s = occ // top_k
                x = np.int64(load_coherent(out, (b, s, occ - s * top_k)))
                if x <= -2:
                    p = ss[row, 4 * t + (-2 - x)] & COMPACT_POS_MASK
                    low = meta64[row, t + p] & 0xFFFFFFFF
                    out[b, s, occ - s * top_k] = -1 if low == 0xFFFFFFFF else low
                occ += tile
        if tid == 0:
            ss[0, rid] = m
            ss[0, n + rid] = 0
            ss[0, 2 * n + rid] = 0
            ss[0, 3 * n + rid] = sigma - 0x80000000 if (degraded or flag[0] != 0) else sigma
            nc = (cursor + min(m, np.int64(hot))) % hot
            pk = (e_now << cbits) | nc
            if pk >= 0x80000000:
                pk -= 0x100000000
            cache_policy[0, rid] = pk
            if record:
                miss_count[b] = m

    @cuda.jit(device=True, inline=True)
    def arrive(counters, b):
        """Count this tile as arrived at request ``b``: 1 if it was the last one and so finishes
        the request, else 0 (always 0 with a committer tile, which finishes it instead)."""
        last = cuda.atomic.add(counters, (b, 1), 1) == tiles - 1
        return 1 if last and not committer else 0

    @cuda.jit(device=True, inline=True)
    def finish_request(top_k_tokens, dbt, hcl, dbl, host_words, dev_words, out, seq_lens,
                       cache_index, cache_policy, scratch_locs, ss, meta64, miss_src, miss_dst,
                       miss_count, counters, flags, claim_keys, claim_first, unique_token,
                       unique_claim, words_per_item, b, rid, tid, vict, aux, scan, flag):
        """Once every tile of request ``b`` has arrived: index the scratch table by unique_idx,
        reset the request's workspace, commit. (At most 29 arguments: Python passes a longer call
        as ``*args``, which Numba cannot inline.)"""
        n = dbt.shape[0]
        tail = dbt.shape[1] - hot
        row = rid + 1
        sigma = next_sigma_dev(np.int64(ss[0, 3 * n + rid]))
        cuda.threadfence()
        m = load_coherent(ss, (0, n + rid))
        u = tid
        while u < m:
            p = table_find_dev(meta64, row, t, sigma, load_coherent(unique_token, b * t + u))
            meta64[row, t + p] = (sigma << 32) | u
            ss[row, 4 * t + u] = p
            c = load_coherent(unique_claim, b * t + u)
            claim_keys[b, c] = EMPTY_KEY
            claim_first[b, c] = NO_OCCURRENCE
            u += tile
        j = tid
        while j < 3 * tiles:
            flags[b, j // tiles, j % tiles] = 0
            j += tile
        if tid == 0:
            counters[b, 0] = 0
            counters[b, 1] = 0
        cuda.syncthreads()
        commit_request(top_k_tokens, dbt, hcl, dbl, host_words, dev_words, out, seq_lens,
                       cache_index, cache_policy, scratch_locs, ss, meta64, miss_src, miss_dst,
                       miss_count, words_per_item, tail, n, b, rid, tid, vict, aux, scan, flag)

    @jit_kernel(max_threads=tile)
    def swap(top_k_tokens, dbt, hcl, dbl, host_words, dev_words, out, req_pool_indices, seq_lens,
             cache_index, cache_policy, scratch_locs, ss, meta64, num_real_reqs, miss_src,
             miss_dst, miss_count, counters, flags, claim_keys, claim_first, claim_unique,
             unique_token, unique_claim, copy_src, copy_dst, words_per_item, tail, n):
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        if b >= num_real_reqs[0]:
            for r in range(reps):
                occ = (cuda.blockIdx.y * tile + tid) * reps + r
                if occ < t:
                    out[b, occ // top_k, occ % top_k] = 0
            if record and cuda.blockIdx.y == 0 and tid == 0:
                miss_count[b] = 0
            return
        shared = cuda.shared.array(5, np.int32)   # ticket, hits, firsts before, last, has dups
        scan = cuda.shared.array(tile, np.int32)
        vict = cuda.shared.array(t, np.int16)
        aux = cuda.shared.array(t, np.int16)
        flag = cuda.shared.array(2, np.int32)     # hash degraded, a proposal this round
        claim = cuda.local.array(reps, np.int32)   # claim position of a missed occurrence, or -1
        token = cuda.local.array(reps, np.int32)
        is_first = cuda.local.array(reps, np.int32)
        if tid == 0:
            # tiles take their index from a ticket, so a tile only ever waits for tiles that started
            shared[0] = cuda.atomic.add(counters, (b, 0), 1)
            shared[1] = 0
            shared[2] = 0
            shared[3] = 0
            shared[4] = 0
        cuda.syncthreads()
        y = shared[0]
        first = (y * tile + tid) * reps          # this thread's occurrences: first .. first+reps-1
        rid = req_pool_indices[b]
        row = rid + 1
        cap = scratch_locs.shape[1]
        e_now = next_epoch_dev(np.int64(cache_policy[0, rid]), cbits, ebits)
        gen = np.int64(ss[0, 3 * n + rid])
        degraded = gen < 0
        sigma = next_sigma_dev(gen)

        is_committer = committer and y == tiles
        base = 0                                  # first misses in the earlier tiles
        num_copies = 0
        if is_committer:
            # it took the request's last ticket, so every other tile of the request has
            # started: wait until all of them have arrived
            if tid == 0:
                while load_coherent(counters, (b, 1)) < tiles:
                    pass
        else:
            # 1. classify: outputs of non-misses, stamps, scratch-table inserts, claims of
            # missed tokens
            for r in range(reps):
                occ = first + r
                claim[r] = -1
                is_first[r] = 0
                if occ < t:
                    kind, val, tok = classify_dev(top_k_tokens, seq_lens, dbt, dbl, hcl,
                                                  cache_index, b, rid, occ, top_k, steps, hot,
                                                  tail, degraded)
                    res = np.int64(-1)
                    if kind == 1:
                        res = val
                    elif kind == 2:
                        res = dbl[rid, val]
                        if cuda.atomic.exch(cache_policy, (row, val), np.int32(e_now)) != e_now:
                            cuda.atomic.add(shared, 1, 1)
                    elif kind == 3:
                        table_insert_dev(meta64, row, t, sigma, tok)
                        p = claim_token(claim_keys, b, tok)
                        cuda.atomic.min(claim_first, (b, p), np.int32(occ))
                        claim[r] = p
                        token[r] = tok
                    if kind != 3:
                        out[b, occ // top_k, occ % top_k] = res
            cuda.syncthreads()
            if tid == 0 and shared[1] > 0:
                cuda.atomic.add(ss, (0, 2 * n + rid), shared[1])
            publish(flags, b, CLAIMED, y, 1, tid)

            # 2. once the earlier tiles have claimed, an occurrence is its token's first iff
            # claim_first names it (later tiles only add larger occurrences); rank the firsts
            wait_for_tiles(flags, b, CLAIMED, y, tid, tile)
            count = 0
            for r in range(reps):
                if claim[r] >= 0:
                    if load_coherent(claim_first, (b, claim[r])) == first + r:
                        is_first[r] = 1
                        count += 1
                    else:
                        shared[4] = 1
            rank, num_first = block_exclusive_scan(scan, count, tid, tile)
            publish(flags, b, COUNTED, y, num_first + 1, tid)
            before = wait_for_tiles(flags, b, COUNTED, y, tid, tile)
            if before > 0:
                cuda.atomic.add(shared, 2, before)
            cuda.syncthreads()
            base = shared[2]

            # 3. unique_idx = base + rank: outputs, copy list (scratch misses) and plan
            u = base + rank
            copies = 0
            for r in range(reps):
                if is_first[r] == 1:
                    claim_unique[b, claim[r]] = u
                    unique_token[b * t + u] = token[r]
                    unique_claim[b * t + u] = claim[r]
                    occ = first + r
                    if u < cap:
                        loc = scratch_locs[rid, u]
                        out[b, occ // top_k, occ % top_k] = loc
                        if loc >= 0:
                            copies += 1
                    else:
                        out[b, occ // top_k, occ % top_k] = -2 - u
                    u += 1
            entry, num_copies = block_exclusive_scan(scan, copies, tid, tile)
            entry += b * t + base
            u = base + rank
            for r in range(reps):
                if is_first[r] == 1:
                    if u < cap and scratch_locs[rid, u] >= 0:
                        src = hcl[rid, token[r]]
                        dst = scratch_locs[rid, u]
                        copy_src[entry] = src
                        copy_dst[entry] = dst
                        entry += 1
                        if record:
                            miss_src[b, u] = src
                            miss_dst[b, u] = dst
                    u += 1
            if tid == 0 and num_first > 0:
                cuda.atomic.add(ss, (0, n + rid), num_first)

            # 4. publish NUMBERED. A tile holding later occurrences of missed tokens then waits for
            # NUMBERED of the earlier tiles and gives them their first occurrence's location; it
            # arrives (the per-request arrival counter) only after that, the others at once.
            publish(flags, b, NUMBERED, y, 1, tid)
            dups = shared[4]
            if tid == 0 and dups == 0:
                shared[3] = arrive(counters, b)
            if dups == 1:
                wait_for_tiles(flags, b, NUMBERED, y, tid, tile)
                for r in range(reps):
                    if claim[r] >= 0 and is_first[r] == 0:
                        u = load_coherent(claim_unique, (b, claim[r]))
                        occ = first + r
                        loc = scratch_locs[rid, u] if u < cap else -2 - u
                        out[b, occ // top_k, occ % top_k] = loc
                cuda.threadfence()
                cuda.syncthreads()
                if tid == 0:
                    shared[3] = arrive(counters, b)
        cuda.syncthreads()

        # 5. the committer tile, or without one the last tile to arrive, finishes the request.
        # Copy destinations were read above, before the commit can swap scratch locations.
        if is_committer or shared[3] == 1:
            finish_request(top_k_tokens, dbt, hcl, dbl, host_words, dev_words, out, seq_lens,
                           cache_index, cache_policy, scratch_locs, ss, meta64, miss_src, miss_dst,
                           miss_count, counters, flags, claim_keys, claim_first, unique_token,
                           unique_claim, words_per_item, b, rid, tid, vict, aux, scan, flag)

        # 6. this tile's scratch copies (host -> scratch locations); a committer tile has none
        start = b * t + base
        copy_items_flat(host_words, copy_src, start, dev_words, copy_dst, start, num_copies,
                        words_per_item, tid, tile)

    return swap


def block_threads(num_occurrences: int) -> int:
    """Threads per tile on a GPU: one per occurrence up to ``MAX_THREADS``, a multiple of 32."""
    return min(MAX_THREADS, max(LANES, -(-int(num_occurrences) // LANES) * LANES))


def tile_threads(num_occurrences: int) -> int:
    """Threads per tile. The simulator uses 32 so that small tests run several tiles per request,
    as sglang's sizes do on a GPU."""
    threads = block_threads(num_occurrences)
    return threads if device.backend() == "cuda" else min(threads, LANES)


def tile_reps(batch: int, num_occurrences: int, tile: int) -> int:
    """Occurrences per thread: the fewest that keep the tiles within two per SM. A 1024-thread tile
    takes 64 registers per thread, so one runs per SM at a time and the tiles run in at most two
    waves; on the H200 that measured better (batch 64) than one wave of 512-thread tiles with four
    occurrences per thread. The simulator uses 2 whenever a request has more than two tiles."""
    tiles = -(-int(num_occurrences) // tile)
    if device.backend() != "cuda":
        return 2 if tiles > 2 else 1
    reps = 1
    while reps < tiles and batch * -(-tiles // reps) > 2 * device.sm_count():
        reps += 1
    return reps


def committer_tile(batch: int, tiles: int) -> bool:
    """Whether each request gets one more tile, without occurrences, that commits it.

    Only when every tile, committers included, runs at once (one 1024-thread tile per SM): the
    commit then runs on an SM of its own beside the copies, and no tile copies after committing.
    When the tiles run in two waves (batch 64 at sglang's sizes) a waiting committer would hold an
    SM that a tile could use, so the last tile to arrive commits instead. The simulator (one "SM")
    takes the second path; the random test forces each."""
    return batch * (tiles + 1) <= device.sm_count()


def geometry(batch: int, num_occurrences: int) -> tuple[int, int, int, bool]:
    """(threads per tile, occurrences per thread, tiles per request, committer tile) of a
    launch; the grid is ``(batch, tiles + committer)``."""
    tile = tile_threads(num_occurrences)
    reps = tile_reps(batch, num_occurrences, tile)
    tiles = -(-int(num_occurrences) // (tile * reps))
    return tile, reps, tiles, committer_tile(batch, tiles)


def load_cache_to_device_buffer_spec_mla(
        *, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, state, num_real_reqs,
        miss_src=None, miss_dst=None, miss_count=None, item_size_bytes=None) -> None:
    """Resolve all ``steps * top_k`` occurrences of each request in one launch.

    top_k_tokens: ``[batch, steps, top_k]`` int32, 2 <= steps <= 4, steps * top_k <= 8192, dense
    rows. device_buffer_tokens / device_buffer_locs: ``[num_requests, H + tail]`` int32 (same
    layout; mutated). host_cache_locs: ``[num_requests, max_positions]`` int64, row-contiguous.
    host_cache: the host pool (``device.host_cache_array``), item ``i`` at byte
    ``i * item_size_bytes``; device_buffer: the device pool (mutated). top_k_device_locs:
    ``[batch, steps, top_k]`` int32 output. req_pool_indices: ``[batch]`` int64, distinct.
    seq_lens: ``[batch * steps]`` int32, ``b * steps + step``. state: ``HiSparseSpecState``
    (mutated). num_real_reqs: ``[>= 1]`` int32 device array. miss_src ``[>= batch, >= steps *
    top_k]`` int64, miss_dst the same in int32 with the same row stride, miss_count ``[>= batch]``
    int32: all three or none. item_size_bytes: defaults to host_cache's row size in bytes; a
    multiple of 16.
    """
    cfg = check_speculative(**locals(), for_kernel=True)
    launch_unchecked(cfg, top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
                     host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
                     host_cache=host_cache, device_buffer=device_buffer,
                     top_k_device_locs=top_k_device_locs, req_pool_indices=req_pool_indices,
                     seq_lens=seq_lens, state=state, num_real_reqs=num_real_reqs,
                     miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)


def launch_unchecked(cfg: SpecConfig, *, top_k_tokens, device_buffer_tokens, host_cache_locs,
                     device_buffer_locs, host_cache, device_buffer, top_k_device_locs,
                     req_pool_indices, seq_lens, state, num_real_reqs, miss_src, miss_dst,
                     miss_count) -> None:
    """The launch *without* any check (``cfg`` as ``check_speculative`` returns it).

    For lessons that show what a check prevents and for the benchmark (which times repeated
    calls on checked arguments); everything else calls the launcher.
    """
    if cfg.batch == 0:
        return
    t = cfg.steps * cfg.top_k
    tile, reps, tiles, committer = geometry(cfg.batch, t)
    swap = _kernels(cfg.steps, cfg.top_k, cfg.hot, tile, reps, committer, cfg.record)
    if not cfg.record:
        miss_src, miss_dst, miss_count = placeholder_plan()
    work = workspace(cfg.batch, t)
    try:
        device.launch(swap, (cfg.batch, tiles + committer), tile, top_k_tokens,
                      device_buffer_tokens,
                      host_cache_locs, device_buffer_locs, device.byte_words(host_cache),
                      device.byte_words(device_buffer), top_k_device_locs, req_pool_indices,
                      seq_lens, state.cache_index, state.cache_policy, state.scratch_locs,
                      state.scratch_state, state.scratch_state.view(np.int64), num_real_reqs,
                      miss_src, miss_dst, miss_count, *work, cfg.item_size_bytes // 8, cfg.tail,
                      cfg.num_requests)
    except Exception:
        # Only the simulator raises inside a kernel (an out-of-bounds index). What the aborted
        # launch left in the workspace and in the running counters (zero between calls) must not
        # leak into the next call.
        clear_workspace(work)
        rids = device.to_host(req_pool_indices).astype(np.int64)
        n = cfg.num_requests
        state.scratch_state[0, COUNT_WORK * n + rids] = 0
        state.scratch_state[0, COUNT_UNION * n + rids] = 0
        raise


class Workspace(NamedTuple):
    """Private buffers of the swap kernel; every tile's ticket, flags and claims are reset by the
    request's finisher (the committer tile, or the last tile to arrive), so they are clean between
    launches.

    counters ``[batch, 2]`` int32: tickets taken and tiles arrived. flags ``[batch, 3, tiles]``
    int32: per tile, claimed / counted (number of first misses + 1) / numbered. claim_keys,
    claim_first, claim_unique ``[batch, K]`` int32 (``K`` = power of two >= 2T): the private set of
    missed tokens (-1 = empty), each token's first occurrence and its unique_idx. unique_token,
    unique_claim ``[batch * T]`` int32: token and claim position of unique miss ``u`` (row ``b``
    starts at ``b * T``, as in the copy list). copy_src / copy_dst ``[batch * T]`` int64: each tile's
    scratch copies, at ``b * T`` + the tile's first unique_idx.
    """

    counters: object
    flags: object
    claim_keys: object
    claim_first: object
    claim_unique: object
    unique_token: object
    unique_claim: object
    copy_src: object
    copy_dst: object


@functools.lru_cache(maxsize=8)
def workspace(batch: int, num_occurrences: int) -> Workspace:
    """The workspace for ``batch`` rows of ``num_occurrences`` (kernels on one stream run in
    order, so calls of the same size share it)."""
    xp = device.xp
    tiles = geometry(batch, num_occurrences)[2]
    flat = batch * num_occurrences
    claims = 1 << (2 * num_occurrences - 1).bit_length()
    work = Workspace(xp.empty((batch, 2), dtype=xp.int32), xp.empty((batch, 3, tiles), dtype=xp.int32),
                     xp.empty((batch, claims), dtype=xp.int32), xp.empty((batch, claims), dtype=xp.int32),
                     xp.empty((batch, claims), dtype=xp.int32), xp.empty(flat, dtype=xp.int32),
                     xp.empty(flat, dtype=xp.int32), xp.empty(flat, dtype=xp.int64),
                     xp.empty(flat, dtype=xp.int64))
    clear_workspace(work)
    return work


def clear_workspace(work: Workspace) -> None:
    """The state every launch expects: no tickets, no flags, an empty claim set."""
    work.counters[...] = 0
    work.flags[...] = 0
    work.claim_keys[...] = EMPTY_KEY
    work.claim_first[...] = NO_OCCURRENCE
