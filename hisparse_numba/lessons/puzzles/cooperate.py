"""Lesson 15's first puzzles: threads that share a row, vote, claim and build a hash together.

* ``STAGE`` (15-a): ``mark_first(sorted_pos, first)``, a block per row: stage the row in shared
  memory, ``cuda.syncthreads()``, compare with the left neighbour: ``first[r, k] = 1`` where lane
  ``k`` starts a run of equal positions (the speculative swap-in's unique misses). ``[R, K]`` int32.
* ``VOTE`` (15-b): ``vote_misses(rows, num_real, any_miss, miss_mask)``, a warp per request: lane
  ``k`` missed when ``rows[r, k] == -1``; lane 0 writes ``any_sync`` and ``ballot_sync`` of that.
* ``CLAIM`` (15-c): ``claim_slots(is_miss, claimed, count)``: every missing lane claims the next
  free entry of a work list with ``cuda.atomic.add`` (sglang's way of listing misses; this
  project ranks them with a scan instead). Any order of the list is right.
* ``HASH`` (15-d): ``build_position_hash(top_k, table, inserted)``, a block per row: fill a shared
  table with ``-1``, insert every lane's position with ``cuda.atomic.cas`` (``hisparse/
  swap_in_hash.py``: Knuth's home, linear probing, a repeated position inserted once), copy it out.
  Any table that linear probing can build is right.
"""

from __future__ import annotations

import functools

import numpy as np

from ...hisparse.single_step.hash import HASH_EMPTY, LANE_BITS
from .harness import POISON, Case, Puzzle
from .rows import hash_home, hash_table_reference

WARP = 32


def one_each(name):
    """``work``: each thread reads (or writes) at most one element of ``name``."""
    return {name: ("read", 1)}


# --- 15-a: stage a row, barrier, read a neighbour ---------------------------------------------


def first_reference(sorted_pos):
    s = np.asarray(sorted_pos)
    first = np.ones(s.shape, np.int32)
    first[:, 1:] = s[:, 1:] != s[:, :-1]
    return first


def stage_case(name, about, rows, block) -> Case:
    rows = np.sort(np.array(rows, np.int32), axis=1)
    args = dict(sorted_pos=rows, first=np.full(rows.shape, POISON, np.int32))
    return Case(name, rows.shape[0], block, args, {"first": first_reference(rows)}, about)


@functools.cache
def stage_cases():
    rng = np.random.default_rng(15)
    return [
        stage_case("the lesson's example", "2 rows of 10 positions, 16 threads: threads 10-15 have no lane",
                   [[3, 3, 5, 8, 8, 8, 9, 12, 12, 20], [1, 2, 2, 4, 7, 7, 9, 9, 9, 9]], 16),
        stage_case("all distinct", "12 positions, 16 threads", [list(range(0, 24, 2))], 16),
        stage_case("all duplicates", "8 copies of one position, 8 threads", [[6] * 8], 8),
        stage_case("one lane", "K = 1, 4 threads", [[5]], 4),
        stage_case("three full rows", "3 rows of 32 lanes, 32 threads",
                   rng.integers(0, 20, size=(3, 32)), 32),
    ]


STAGE = Puzzle(
    key="15-a", cases=stage_cases, cooperative=True,
    work={**one_each("sorted_pos"), "first": ("write", 1)}, draw=("sorted_pos", "first"),
    right="every thread stages its lane, all wait at one barrier (threads without a lane too), then each "
          "reads its left neighbour from shared memory, not from global memory",
    hints=(
        "Three steps: every thread writes its lane into the shared row; everyone waits; then each thread "
        "reads its neighbour from the shared row.",
        "s_row[k] = sorted_pos[r, k] for k < K; cuda.syncthreads() where EVERY thread reaches it (not "
        "inside `if k < K`); then first[r, k] = 1 if k == 0 or s_row[k] != s_row[k - 1] else 0.",
        "if k < K: s_row[k] = sorted_pos[r, k]  /  cuda.syncthreads()  /  if k < K: first[r, k] = 1 if "
        "k == 0 or s_row[k] != s_row[k - 1] else 0",
    ),
)


# --- 15-b: the warp vote ----------------------------------------------------------------------


def vote_reference(rows, num_real):
    rows = np.asarray(rows)
    missed = rows == -1
    missed[num_real:] = False
    mask = (missed * (1 << np.arange(rows.shape[1], dtype=np.int64))).sum(axis=1).astype(np.int64)
    return missed.any(axis=1).astype(np.int32), mask


def vote_case(name, about, rows, num_real=None) -> Case:
    rows = np.array(rows, np.int32)
    num_real = rows.shape[0] if num_real is None else num_real
    any_miss, mask = vote_reference(rows, num_real)
    args = dict(rows=rows, num_real=num_real, any_miss=np.full(rows.shape[0], POISON, np.int32),
                miss_mask=np.full(rows.shape[0], POISON, np.int64))
    return Case(name, rows.shape[0], WARP, args, {"any_miss": any_miss, "miss_mask": mask}, about)


def _lanes(seed, requests, k, miss_fraction):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 1000, size=(requests, k)).astype(np.int32)
    rows[rng.random((requests, k)) < miss_fraction] = -1
    return rows


@functools.cache
def vote_cases():
    return [
        vote_case("the lesson's example", "2 requests of 20 lanes in warps of 32: lanes 20-31 have no lane",
                  _lanes(1, 2, 20, 0.2)),
        vote_case("all hits", "no lane misses", _lanes(2, 2, 24, 0.0)),
        vote_case("all misses", "every lane misses", np.full((1, 32), -1)),
        vote_case("padding rows", "3 rows, num_real = 1: a padding row's -1 lanes are not misses",
                  np.full((3, 16), -1), num_real=1),
        vote_case("one lane", "K = 1", [[-1], [7]]),
    ]


def _explain_vote(case, trace, name, flat, got):
    want = int(case.want[name].reshape(-1)[flat])
    if name == "miss_mask" and got < 0 and int(got) + (1 << 32) == want:
        return ("cuda.ballot_sync returns a signed 32-bit integer (lane 31's bit is its sign), and an "
                "int64 element keeps the sign: store m & 0xFFFFFFFF")
    return None


def _describe_vote(case, name, flat):
    if name == "miss_mask":
        return f"miss_mask[{flat}] (request {flat}: bit k set when lane k missed)"
    return None


VOTE = Puzzle(
    key="15-b", cases=vote_cases, cooperative=True, describe=_describe_vote, explain=_explain_vote,
    value=lambda v: "POISON (never written)" if v == POISON else f"{int(v):#x}" if v > 9 else f"{v}",
    work=one_each("rows"), draw=("rows", "any_miss", "miss_mask"),
    right="every lane of the warp votes (lanes without a selection vote False), and one lane writes what "
          "the warp decided: any_sync says whether any lane missed, ballot_sync which",
    hints=(
        "A vote is a meeting: every lane named in the mask must reach it, even a lane with nothing to say.",
        "miss = k < K and r < num_real and rows[r, k] == -1 (False for lanes past K and for padding rows); "
        "then a = cuda.any_sync(0xFFFFFFFF, miss) and m = cuda.ballot_sync(0xFFFFFFFF, miss) in every "
        "lane; only lane 0 writes. The ballot is a signed 32-bit integer: keep its 32 bits with "
        "m & 0xFFFFFFFF.",
        "miss = False; if k < rows.shape[1] and r < num_real: miss = rows[r, k] == -1  /  a = "
        "cuda.any_sync(FULL, miss); m = cuda.ballot_sync(FULL, miss)  /  if k == 0: any_miss[r] = a; "
        "miss_mask[r] = m & FULL",
    ),
)


# --- 15-c: the atomic claim -------------------------------------------------------------------


def claim_case(name, about, is_miss, grid, block) -> Case:
    is_miss = np.array(is_miss, np.int32)
    lanes = np.flatnonzero(is_miss)
    claimed = np.full(is_miss.size, POISON, np.int32)
    claimed[:lanes.size] = lanes
    args = dict(is_miss=is_miss, claimed=np.full(is_miss.size, POISON, np.int32), count=np.zeros(1, np.int32))
    return Case(name, grid, block, args, {"claimed": claimed, "count": np.array([lanes.size], np.int32)}, about)


def judge_claims(case, got):
    """Right: ``count`` = the misses, ``claimed[:count]`` every missing lane once (any order), the rest POISON."""
    want = int(case.want["count"][0])
    count, claimed = int(got["count"][0]), got["claimed"]
    if count != want:
        return (f"count[0] is {count} where {want} lanes missed: each missing lane adds 1, once, atomically",
                [("count", 0)])
    lanes = np.flatnonzero(case.args["is_miss"])
    listed = claimed[:count]
    for i, lane in enumerate(listed):
        if lane == POISON or lane not in lanes or (listed[:i] == lane).any():
            what = ("nothing (POISON)" if lane == POISON else f"lane {lane}, which did not miss"
                    if lane not in lanes else f"lane {lane} a second time")
            return (f"claimed[{i}] holds {what}: entries 0..count-1 list every missing lane once, in any order",
                    [("claimed", i)])
    beyond = np.flatnonzero(claimed[count:] != POISON)
    if beyond.size:
        i = count + int(beyond[0])
        return (f"claimed[{i}] was written, past the {count} claimed entries: a lane writes only the entry "
                "its claim returned", [("claimed", i)])
    return None


@functools.cache
def claim_cases():
    rng = np.random.default_rng(3)
    return [
        claim_case("the lesson's example", "20 lanes, 7 missing; 3 blocks of 8",
                   [0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0], 3, 8),
        claim_case("all misses", "12 lanes, all missing; 2 blocks of 8", [1] * 12, 2, 8),
        claim_case("all hits", "10 lanes, none missing", [0] * 10, 2, 8),
        claim_case("one lane", "1 lane, missing", [1], 1, 4),
        claim_case("many blocks", "40 lanes; 5 blocks of 8", rng.integers(0, 2, 40), 5, 8),
    ]


CLAIM = Puzzle(
    key="15-c", cases=claim_cases, cooperative=True, judge=judge_claims,
    on_race="a claim is not fixed by a barrier, which orders neither other blocks nor the read and the "
            "write of one thread: cuda.atomic.add reads and adds in one step",
    work={**one_each("is_miss"), "claimed": ("write", 1)}, draw=("is_miss", "claimed", "count"),
    right="cuda.atomic.add returns the count before your add: every missing lane gets its own entry, in "
          "whatever order the threads come",
    hints=(
        "Two lanes must never get the same entry: reading count and writing count + 1 are two steps "
        "another thread can come between.",
        "slot = cuda.atomic.add(count, 0, 1) adds 1 and returns the value before, in one indivisible step; "
        "that old value is this lane's entry. Guard the lanes past the end.",
        "i = cuda.grid(1)  /  if i < is_miss.shape[0] and is_miss[i] == 1: slot = cuda.atomic.add(count, 0, "
        "1); claimed[slot] = i",
    ),
)


# --- 15-d: the position hash, built in shared memory ------------------------------------------


def hash_case(name, about, top_k, block) -> Case:
    top_k = np.array(top_k, np.int32)
    size = 2 * top_k.shape[1]
    table = np.stack([hash_table_reference(row, size) for row in top_k])
    inserted = np.zeros(top_k.shape, np.int32)
    for r, row in enumerate(top_k):
        for e in table[r][table[r] != HASH_EMPTY]:
            inserted[r, e & 0xFFFF] = 1
    args = dict(top_k=top_k, table=np.full(table.shape, POISON, np.int64),
                inserted=np.full(top_k.shape, POISON, np.int32))
    return Case(name, top_k.shape[0], block, args, {"table": table, "inserted": inserted}, about)


def judge_table(case, got):
    """Right: each row's table holds every distinct position once, with a lane that selected it, where
    linear probing from its home entry reaches it; ``inserted`` marks exactly the lanes stored."""
    for r, keys in enumerate(case.args["top_k"]):
        table, inserted = got["table"][r], got["inserted"][r]
        size, flat = table.size, r * table.size
        for j, e in enumerate(table):
            if e == HASH_EMPTY:
                continue
            key, lane = int(e) >> LANE_BITS, int(e) & 0xFFFF
            if e == POISON or e < 0 or lane >= keys.size or keys[lane] != key:
                return (f"table[{r}, {j}] holds {e}, not `position << 16 | lane` of a lane of row {r} "
                        f"(nor -1): every entry is written, empty ones with -1", [("table", flat + j)])
            if sum(1 for x in table if x != HASH_EMPTY and int(x) >> LANE_BITS == key) > 1:
                return (f"position {key} is in table row {r} twice: a repeated position is inserted once "
                        "(the second lane's cas finds the key and stops)", [("table", flat + j)])
            h = hash_home(key, size)
            while h != j:
                if table[h] == HASH_EMPTY:
                    return (f"position {key} sits in table[{r}, {j}] but entry {h} between its home "
                            f"{hash_home(key, size)} and there is empty: a probe would stop before it",
                            [("table", flat + j)])
                h = (h + 1) % size
            if inserted[lane] != 1:
                return (f"inserted[{r}, {lane}] is {inserted[lane]}: lane {lane}'s position is in the table "
                        "with its lane, so its insert succeeded (1)", [("inserted", r * keys.size + lane)])
        stored = {int(e) >> LANE_BITS for e in table if e != HASH_EMPTY}
        for lane, key in enumerate(keys):
            if int(key) not in stored:
                return (f"position {key} (lane {lane} of row {r}) is not in the table", [("inserted", r * keys.size + lane)])
            if inserted[lane] not in (0, 1) or (inserted[lane] == 1 and not (table == (int(key) << LANE_BITS | lane)).any()):
                return (f"inserted[{r}, {lane}] is {inserted[lane]}: 1 only for the lane whose entry is in the "
                        "table, 0 for a repeat", [("inserted", r * keys.size + lane)])
    return None


@functools.cache
def hash_cases():
    return [
        hash_case("the lesson's example", "2 rows of 6 positions, tables of 12 entries, 8 threads",
                  [[5, 1, 8, 42, 9, 0], [100, 7, 33, 12, 64, 3]], 8),
        hash_case("collisions", "positions 1, 9, 17, 25, 33, 41 all have home entry 1", [[1, 9, 17, 25, 33, 41]], 8),
        hash_case("wrap around the end", "positions 3, 11, 19 have home 11, the last entry", [[3, 11, 19, 7, 2, 0]], 8),
        hash_case("duplicates", "positions 5 and 9 selected twice: each inserted once", [[5, 9, 5, 7, 9, 1]], 8),
        hash_case("a table larger than the block", "8 positions, 16 entries, 8 threads: fill and copy in a loop",
                  [[4, 20, 36, 52, 6, 22, 1, 2]], 8),
        hash_case("one lane", "K = 1, 2 entries, 2 threads", [[9]], 2),
    ]


HASH = Puzzle(
    key="15-d", cases=hash_cases, cooperative=True, judge=judge_table, draw=("top_k", "table", "inserted"),
    work={**one_each("top_k"), "inserted": ("write", 1)},
    on_race="between two phases (fill, insert, copy) the fix is a barrier outside any if; inside the insert "
            "it is cuda.atomic.cas, which tests and sets an entry in one step",
    right="fill, barrier, insert with cas (a repeat finds its key and stops), barrier, copy out: the "
          "barriers keep the fill, the inserts and the copy apart",
    hints=(
        "Three phases, each finished by every thread before the next starts: empty the table, insert, copy "
        "it out. Between phases: a barrier. Inside the insert: two lanes may want the same empty entry.",
        "old = cuda.atomic.cas(s_hash, h, -1, entry) writes entry only if s_hash[h] was -1 and returns "
        "what was there: -1 means you got it; the same key means a repeat (inserted 0); anything else: "
        "h + 1, wrapping at size.",
        "j = k; while j < size: s_hash[j] = -1; j += nthreads  /  cuda.syncthreads()  /  if k < K: "
        "key = top_k[r, k]; h = home; while True: old = cuda.atomic.cas(s_hash, h, -1, (key << 16) | k); "
        "if old == -1: ok = 1; break; if (old >> 16) == key: ok = 0; break; h = (h + 1) % size  /  "
        "inserted[r, k] = ok  /  cuda.syncthreads()  /  copy s_hash to table[r, :] like the fill",
    ),
)
