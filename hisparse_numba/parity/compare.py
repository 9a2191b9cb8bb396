"""Comparisons of two implementations' results (NumPy snapshots), byte-exact or at slot level.

A *check* is a ``Check(name, ok, detail)``; every function here returns a list of them. Inputs are
flat snapshots ``{name: numpy array}`` as ``speculative.examples.snapshot`` makes them (the speculative
state as ``state.<field>``), taken from two runs that started from byte-identical arrays.

Why slot level: sglang numbers a request's unique misses with an atomic counter, so which miss
lands in which hot slot (and therefore every location table) can change from run to run there.
What cannot change is what a learner relies on: the counts, which occurrences get a location,
the locations of hits, the *set* of locations the misses land in, the set of tokens resident
afterwards, the CLOCK cursor and epoch, the counters, and each side's own consistency (every
output location holds its token's item; every resident token is found by the hash; no token
is held twice).

Which slots a union-mode call evicts is sglang's to decide, not its race's: miss ``i`` samples
fixed ring positions (docs/speculative-swap-in.md), so the slots chosen by sampling are compared
exactly. A miss whose samples are all taken goes to the fallback; those victims are compared
separately, so a difference there is named as such and not smeared over the resident-token and
scratch checks. Finally ``exclude_unstable`` sets aside every check in which sglang's own two runs
on the same input already differ: only what sglang determines can fail.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..hisparse.speculative.examples import wrong_items
from ..hisparse.speculative.state import CLOCK_VICTIM_SAMPLES, cursor_bits, epoch_bits, next_epoch


class Check(NamedTuple):
    name: str
    ok: bool
    detail: str = ""
    excluded: str = ""        # why the check was set aside (then ok is True); "" when it counts


def byte_diff(a: dict, b: dict, keys=None) -> list:
    """Names of the arrays whose bytes (or dtype/shape) differ."""
    keys = sorted(a) if keys is None else keys
    return [k for k in keys if a[k] is not None and (
        a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or a[k].tobytes() != b[k].tobytes())]


def byte_checks(a: dict, b: dict, keys=None, prefix="") -> list:
    """One check per array: byte-identical."""
    keys = sorted(k for k in a if a[k] is not None) if keys is None else keys
    bad = set(byte_diff(a, b, keys))
    return [Check(prefix + k, k not in bad, "" if k not in bad else _first_diff(a[k], b[k]))
            for k in keys]


def _first_diff(x, y) -> str:
    if x.shape != y.shape or x.dtype != y.dtype:
        return f"shape/dtype {x.shape} {x.dtype} vs {y.shape} {y.dtype}"
    idx = np.argwhere(x != y)
    n = len(idx)
    at = tuple(int(i) for i in idx[0]) if n else ()
    return f"{n} elements differ, first at {at}: {x[at]!r} vs {y[at]!r}" if n else ""


def duplicate_tokens(dbt_row_hot: np.ndarray) -> int:
    """How many extra copies of tokens the hot slots hold (0 when every token is held once)."""
    live = dbt_row_hot[dbt_row_hot >= 0]
    return int(live.size - np.unique(live).size)


def unindexed_tokens(snap: dict, rid: int) -> int:
    """Resident tokens of request ``rid`` that neither hash bank points to their slot."""
    hot = snap["state.cache_policy"].shape[1]
    banks = snap["state.cache_index"][rid]
    entries = set(int(e) for e in banks.reshape(-1) if e >= 0)
    dbt = snap["device_buffer_tokens"][rid, :hot]
    return sum(1 for s in range(hot) if dbt[s] >= 0 and ((s << 32) | int(dbt[s])) not in entries)


def miss_tokens(snap: dict, b: int) -> set:
    """The tokens row ``b`` recorded in its miss plan (host location mapped back to the token)."""
    rid = int(snap["req_pool_indices"][b])
    count = int(snap["miss_count"][b])
    hcl = snap["host_cache_locs"][rid]
    token_of = {int(h): t for t, h in enumerate(hcl) if h >= 0}
    return {token_of.get(int(s), -1) for s in snap["miss_src"][b, :count]}


def _rows(snap):
    real = int(snap["num_real_reqs"][0])
    return [(b, int(snap["req_pool_indices"][b])) for b in range(min(real, snap["top_k_tokens"].shape[0]))]


class UnionVictims(NamedTuple):
    union_mode: bool
    misses: int
    sampled: frozenset     # hot slots the sampling step picks
    fallback: int          # misses whose samples were all referenced by this call


def union_victims(before: dict, b: int) -> UnionVictims:
    """sglang's union-mode victim sampling for row ``b``, worked out from the arrays before the
    call (docs/speculative-swap-in.md): classify every occurrence, stamp the hit slots with this
    call's epoch E, then miss ``i`` of ``m`` samples ring positions ``i + (k * size // count) * m``
    after the cursor (``size = (H - 1 - i) // m + 1``, ``count = min(size, 6)``) and takes the
    oldest slot not stamped E, the first on a tie; a miss with none goes to the fallback.
    Partitions are disjoint, so the result does not depend on which token got which ``i``."""
    policy = before["state.cache_policy"]
    hot = policy.shape[1]
    rid = int(before["req_pool_indices"][b])
    slot_tokens, slot_locs = before["device_buffer_tokens"][rid], before["device_buffer_locs"][rid]
    host_locs = before["host_cache_locs"][rid]
    steps = before["top_k_tokens"].shape[1]
    tail = slot_tokens.shape[0] - hot
    tail_tokens = {int(t) for t, loc in zip(slot_tokens[hot:], slot_locs[hot:]) if t >= 0 and loc >= 0}
    slot_of = {int(t): s for s, t in enumerate(slot_tokens[:hot]) if t >= 0}
    cbits, ebits = cursor_bits(hot), epoch_bits(hot)
    packed = int(policy[0, rid]) & 0xFFFFFFFF
    e_now = next_epoch(packed, cbits, ebits)
    cursor = (packed & ((1 << cbits) - 1)) % hot
    ref = policy[rid + 1].astype(np.int64)
    hits, misses = 0, set()
    for step in range(steps):
        seq_len = int(before["seq_lens"][b * steps + step])
        for tok in before["top_k_tokens"][b, step].tolist():
            if tok < 0 or tok >= seq_len or (tok >= seq_len - tail and tok in tail_tokens):
                continue
            slot = slot_of.get(tok, -1)
            if slot >= 0:
                hits += ref[slot] != e_now
                ref[slot] = e_now
            elif host_locs[tok] >= 0:
                misses.add(tok)
    m = len(misses)
    if m == 0 or m + hits > hot:
        return UnionVictims(m + hits <= hot, m, frozenset(), 0)
    sampled, fallback = set(), 0
    for i in range(m):
        size = (hot - 1 - i) // m + 1
        count = min(size, CLOCK_VICTIM_SAMPLES)
        best, best_age = -1, -1
        for k in range(count):
            slot = (cursor + i + (k * size // count) * m) % hot
            if ref[slot] != e_now:
                age = (e_now - int(ref[slot])) & ((1 << ebits) - 1)
                if age > best_age:
                    best, best_age = slot, age
        if best >= 0:
            sampled.add(best)
        else:
            fallback += 1
    return UnionVictims(True, m, frozenset(sampled), fallback)


def evicted_slots(after: dict, before: dict, rid: int) -> set:
    """Hot slots of request ``rid`` whose token changed: the call's applied victims."""
    hot = before["state.cache_policy"].shape[1]
    return set(np.flatnonzero(after["device_buffer_tokens"][rid, :hot]
                              != before["device_buffer_tokens"][rid, :hot]).tolist())


def union_summary(before: dict) -> str:
    """A note: how the misses of union-mode rows found their victims."""
    rows = [union_victims(before, b) for b, _ in _rows(before)]
    union = [r for r in rows if r.union_mode and r.misses]
    if not union:
        return "no row in union mode"
    m = sum(r.misses for r in union)
    fb = sum(r.fallback for r in union)
    return (f"union mode in {len(union)} of {len(rows)} rows: {m} misses, {m - fb} take a sampled "
            f"victim, {fb} go to the fallback")


def internal_checks(snap: dict, before: dict, item_words: int, label: str) -> list:
    """One side's own consistency after a speculative call."""
    hot = snap["state.cache_policy"].shape[1]
    bad_items = wrong_items(snap, item_words)
    dups = sum(duplicate_tokens(snap["device_buffer_tokens"][rid, :hot]) for _, rid in _rows(snap))
    unindexed = sum(unindexed_tokens(snap, rid) for _, rid in _rows(snap))
    return [
        Check(f"{label}: every output holds its token's item", not bad_items,
              f"{len(bad_items)} wrong, first {bad_items[:3]}" if bad_items else ""),
        Check(f"{label}: no token held twice", dups == 0, f"{dups} duplicates" if dups else ""),
        Check(f"{label}: every resident token indexed by the hash", unindexed == 0,
              f"{unindexed} unindexed" if unindexed else ""),
    ]


def _set_check(name, x, y) -> Check:
    x, y = set(x), set(y)
    return Check(name, x == y, "" if x == y else f"only ours {len(x - y)}, only sglang {len(y - x)}")


def spec_slot_checks(ours: dict, theirs: dict, before: dict, item_words: int, cross_only=False) -> list:
    """Slot-level equality of two speculative calls made from the same ``before`` snapshot.

    In union-mode rows the victims are split: the slots sampling picks (compared exactly) and
    the fallback's (compared on their own); the fallback victims of either side are left out of
    the resident-token and scratch-location sets, so that each difference is counted once."""
    hot = before["state.cache_policy"].shape[1]
    n = before["state.cache_policy"].shape[0] - 1
    out_o, out_t = ours["top_k_device_locs"], theirs["top_k_device_locs"]
    checks = [
        Check("output mask (which occurrences get a location)", np.array_equal(out_o >= 0, out_t >= 0)),
        Check("counters (scratch_state row 0)",
              np.array_equal(ours["state.scratch_state"][0, :4 * n], theirs["state.scratch_state"][0, :4 * n]),
              _first_diff(ours["state.scratch_state"][0, :4 * n], theirs["state.scratch_state"][0, :4 * n])),
        Check("CLOCK state (cache_policy row 0)",
              np.array_equal(ours["state.cache_policy"][0], theirs["state.cache_policy"][0]),
              _first_diff(ours["state.cache_policy"][0], theirs["state.cache_policy"][0])),
    ]
    if "miss_count" in before:
        checks.append(Check("miss_count", np.array_equal(ours["miss_count"], theirs["miss_count"]),
                            _first_diff(ours["miss_count"], theirs["miss_count"])))
    # per check: [requests that differ, elements only on our side, elements only on sglang's]
    tally = {k: [0, 0, 0] for k in ("hits", "miss", "resident", "epochs", "scratch", "src", "dst",
                                    "sampled", "fallback", "new")}

    def count(key, x, y, how="set"):
        if how != "set":       # "exact": element by element; "multiset": after sorting
            x, y = (np.asarray(x), np.asarray(y)) if how == "exact" else (np.sort(x), np.sort(y))
            only_x = only_y = int(np.sum(x != y))
        else:
            x, y = set(np.asarray(x).tolist()), set(np.asarray(y).tolist())
            only_x, only_y = len(x - y), len(y - x)
        if only_x or only_y:
            t = tally[key]
            t[0], t[1], t[2] = t[0] + 1, t[1] + only_x, t[2] + only_y

    for b, rid in _rows(before):
        was = before["device_buffer_tokens"][rid, :hot]
        tok = before["top_k_tokens"][b]
        hit = np.isin(tok, was[was >= 0]) & (out_o[b] >= 0) & (out_t[b] >= 0)
        count("hits", out_o[b][hit], out_t[b][hit], how="exact")
        miss = ~np.isin(tok, was[was >= 0])
        count("miss", out_o[b][miss], out_t[b][miss])
        res_o, res_t = ours["device_buffer_tokens"][rid, :hot], theirs["device_buffer_tokens"][rid, :hot]
        scr_o, scr_t = ours["state.scratch_locs"][rid], theirs["state.scratch_locs"][rid]
        plan = union_victims(before, b)
        if plan.union_mode and plan.misses:
            ev_o, ev_t = evicted_slots(ours, before, rid), evicted_slots(theirs, before, rid)
            count("sampled", sorted(ev_o & plan.sampled), sorted(ev_t & plan.sampled))
            count("fallback", sorted(ev_o - plan.sampled), sorted(ev_t - plan.sampled))
            aside = sorted((ev_o | ev_t) - plan.sampled)
            old_tokens = was[aside] if aside else []
            old_locs = before["device_buffer_locs"][rid, aside] if aside else []
            res_o, res_t = np.setdiff1d(res_o, old_tokens), np.setdiff1d(res_t, old_tokens)
            scr_o, scr_t = np.setdiff1d(scr_o, old_locs), np.setdiff1d(scr_t, old_locs)
        count("new", np.setdiff1d(res_o, was), np.setdiff1d(res_t, was))
        count("resident", res_o, res_t)
        count("epochs", ours["state.cache_policy"][rid + 1], theirs["state.cache_policy"][rid + 1], how="multiset")
        count("scratch", scr_o, scr_t)
        if "miss_count" in before:
            c_o, c_t = int(ours["miss_count"][b]), int(theirs["miss_count"][b])
            count("src", ours["miss_src"][b, :c_o], theirs["miss_src"][b, :c_t])
            count("dst", ours["miss_dst"][b, :c_o], theirs["miss_dst"][b, :c_t])

    def check(name, key):
        rows, only_o, only_t = tally[key]
        return Check(name, rows == 0, f"{rows} requests differ: {only_o} only ours, {only_t} only sglang"
                     if rows else "")
    checks += [check("hit outputs (exact)", "hits"),
               check("miss locations (set per request)", "miss"),
               check("union-mode victims chosen by sampling (set per request)", "sampled"),
               check("union-mode victims found by the fallback (set per request)", "fallback"),
               check("tokens brought into the hot slots (set per request)", "new"),
               check("resident tokens (hot-slot table as a set)", "resident"),
               check("reference epochs (multiset per request)", "epochs"),
               check("scratch locations (set per request)", "scratch")]
    if "miss_count" in before:
        checks += [check("plan sources (set per request)", "src"),
                   check("plan destinations (set per request)", "dst")]
    if cross_only:
        return checks
    return checks + internal_checks(ours, before, item_words, "ours") + \
        internal_checks(theirs, before, item_words, "sglang")


def exclude_unstable(checks: list, sglang_twice: list) -> list:
    """Set aside each failing check that also fails between sglang's own two runs on the same
    input (``sglang_twice``, cross checks only): there sglang itself is not deterministic."""
    unstable = {c.name: c.detail for c in sglang_twice if not c.ok}
    return [c._replace(ok=True, excluded=f"sglang's two runs differ here too: {unstable[c.name]}")
            if not c.ok and c.name in unstable else c for c in checks]


def fallback_slots_set_aside(ours: dict, theirs: dict, before: dict) -> int:
    """How many hot slots ``spec_slot_checks`` leaves out of the resident-token and scratch sets:
    the union-mode fallback victims of either side."""
    total = 0
    for b, rid in _rows(before):
        plan = union_victims(before, b)
        if plan.union_mode and plan.misses:
            total += len((evicted_slots(ours, before, rid) | evicted_slots(theirs, before, rid)) - plan.sampled)
    return total


def handoff_counts(after_first: dict, after_second: dict) -> tuple[int, int]:
    """(re-missed resident tokens, tokens held twice) summed over the rows of the second call.

    A re-missed token was resident in a hot slot after the first call, is selected by the second,
    and the second implementation still fetched it from the host (its state did not find it)."""
    hot = after_first["state.cache_policy"].shape[1]
    remissed = dups = 0
    for b, rid in _rows(after_second):
        resident = set(int(t) for t in after_first["device_buffer_tokens"][rid, :hot] if t >= 0)
        selected = set(int(t) for t in after_second["top_k_tokens"][b].reshape(-1) if t >= 0)
        remissed += len(miss_tokens(after_second, b) & resident & selected)
        dups += duplicate_tokens(after_second["device_buffer_tokens"][rid, :hot])
    return remissed, dups


def ring_checks(ours: dict, theirs: dict) -> list:
    """kv-canary context state: buffer and counters exact; new ring rows equal as a multiset
    (the order in which concurrent threads reserve ring rows is a race in both)."""
    checks = byte_checks(ours, theirs, ["canary_buf", "violation_write_index", "slot_run_counter",
                                        "kernel_run_counter"])
    end = min(int(ours["violation_write_index"][0]), ours["violation_ring"].shape[0])

    def rows(r):
        r = r[:end]
        return r[np.lexsort(r.T[::-1])] if len(r) else r
    same = rows(ours["violation_ring"]).tobytes() == rows(theirs["violation_ring"]).tobytes()
    checks.append(Check(f"violation_ring ({end} rows, as a multiset)", same))
    return checks
