"""Lesson 14's per-request puzzles: the hit test, the position hash's probe, the CLOCK victim.

* ``HITS`` (14-c): ``hit_rows(tags, locs, top_k, seq_lens, num_real, hot_buffer_size, rows)``, one
  block per request row ``r``, lanes ``k < K`` in a block-stride loop: the device row each lane of
  the swap-in reads (the newest token's column ``H``, a hit's slot row, ``-1`` for a miss or a
  padding row ``r >= num_real``). ``tags``/``locs`` ``[R, H + 1]`` int32, ``top_k``/``rows``
  ``[R, K]`` int32. Reference: ``hit_rows_reference`` (the hit step of
  ``load_cache_to_device_buffer_mla_reference``).
* ``PROBE`` (14-e): ``hash_find_dev(table, size, key) -> lane or -1`` over the swap-in's position
  hash (``hisparse/swap_in_hash.py``: entries ``key << 16 | lane``, ``-1`` empty, Knuth's hash,
  linear probing with wrap-around). Reference: ``hash_find_reference``.
* ``CLOCK`` (14-f): ``pick_victims(ref, cursor, e_now, miss_count, ebits, victims)``, one block per
  request, a thread per miss: the union-mode CLOCK victim of the speculative swap-in, the oldest
  of the miss's sampled slots not stamped this call. Reference: ``union_victim_reference``.
"""

from __future__ import annotations

import functools

import numpy as np

from ...device import cuda
from ...hisparse.speculative.state import CLOCK_VICTIM_SAMPLES
from ...hisparse.speculative.reference import union_sample_positions, union_victim_reference
from ...hisparse.single_step.hash import HASH_EMPTY, HASH_MULTIPLIER, LANE_BITS
from .harness import POISON, Case, Puzzle

# --- 14-c: the hit test, one block per request ------------------------------------------------


def hit_rows_reference(tags, locs, top_k, seq_lens, num_real, hot_buffer_size):
    """Device row each lane reads: the newest token's (column H), a hit's, or -1 (miss, padding)."""
    H = hot_buffer_size
    out = np.full(top_k.shape, -1, np.int32)
    for r in range(min(num_real, top_k.shape[0])):
        for k, pos in enumerate(top_k[r]):
            if pos == seq_lens[r] - 1:
                out[r, k] = locs[r, H]
            else:
                slots = np.flatnonzero(tags[r, :H] == pos)
                out[r, k] = locs[r, slots[0]] if slots.size else -1
    return out


def hit_case(name, about, tags, locs, top_k, seq_lens, block, num_real=None) -> Case:
    tags, locs = np.array(tags, np.int32), np.array(locs, np.int32)
    top_k, seq_lens = np.array(top_k, np.int32), np.array(seq_lens, np.int32)
    H = tags.shape[1] - 1
    num_real = top_k.shape[0] if num_real is None else num_real
    args = dict(tags=tags, locs=locs, top_k=top_k, seq_lens=seq_lens, num_real=num_real,
                hot_buffer_size=H, rows=np.full(top_k.shape, POISON, np.int32))
    want = hit_rows_reference(tags, locs, top_k, seq_lens, num_real, H)
    return Case(name, top_k.shape[0], block, args, {"rows": want}, about)


def _random_rows(seed, requests, H, K, hits):
    """Slot tables with distinct tags, and selections with ``hits`` resident positions per row."""
    rng = np.random.default_rng(seed)
    tags = np.zeros((requests, H + 1), np.int32)
    locs = rng.permutation(requests * (H + 1)).reshape(requests, H + 1).astype(np.int32)
    top_k = np.zeros((requests, K), np.int32)
    seq_lens = np.full(requests, 4 * (H + K), np.int32)
    for r in range(requests):
        positions = rng.permutation(4 * (H + K) - 1)
        tags[r] = positions[:H + 1]                 # column H: a stale tag, not a hot slot
        chosen = np.concatenate([positions[:hits], positions[H + 1:H + 1 + K - hits]])
        top_k[r] = rng.permutation(chosen)
    return tags, locs, top_k, seq_lens


def _hit_case_random(name, about, seed, requests, H, K, hits, block, num_real=None):
    return hit_case(name, about, *_random_rows(seed, requests, H, K, hits), block, num_real)


@functools.cache
def hit_cases():
    return [
        hit_case("the lesson's example", "2 requests, H = 6, K = 4 lanes, 4 threads; column H's tag is stale",
                 [[4, 9, 1, 7, 12, 3, 15], [2, 8, 5, 0, 11, 6, 13]],
                 [[10, 3, 7, 0, 5, 8, 1], [2, 11, 4, 6, 9, 12, 13]],
                 [[7, 15, 3, 13], [13, 8, 7, 14]], [16, 15], 4),
        _hit_case_random("more lanes than threads", "1 request, K = 10 lanes, 4 threads: a lane loop",
                         1, 1, 8, 10, 5, 4),
        _hit_case_random("padding rows", "3 rows, num_real = 1: rows 1 and 2 are CUDA-graph padding",
                         2, 3, 6, 5, 3, 8, num_real=1),
        _hit_case_random("all hits", "2 requests, every lane resident", 3, 2, 8, 6, 6, 8),
        _hit_case_random("all misses", "2 requests, no lane resident", 4, 2, 8, 6, 0, 8),
        _hit_case_random("one lane", "3 requests, K = 1, 1 thread", 5, 3, 4, 1, 1, 1),
    ]


def _describe_lane(case, name, flat):
    if name != "rows":
        return None
    r, k = divmod(flat, case.args["top_k"].shape[1])
    padding = " (a padding row)" if r >= case.args["num_real"] else ""
    return f"rows[{r}, {k}] (request {r}{padding}, lane {k}, position {case.args['top_k'][r, k]})"


def _explain_hit(case, trace, name, flat, got):
    if trace is None:
        return None
    width = case.args["tags"].shape[1]
    reads = trace.of("tags", "read")
    if any(a.index // width != a.block[0] for a in reads):
        return "a block read another request's row of tags: request r is block r, its row is tags[r, :]"
    if any(a.index % width == width - 1 for a in reads):
        return "column H of tags is the newest token's column, not a hot slot: search slots 0..H-1"
    return None


HITS = Puzzle(
    key="14-c", cases=hit_cases, describe=_describe_lane, explain=_explain_hit,
    work={"rows": ("write", lambda c: -(-c.args["top_k"].shape[1] // c.block))},
    draw=("tags", "top_k", "rows"),
    right="block r serves request r, its threads walk the lanes in steps of blockDim.x, padding rows "
          "read nothing, and a hit is the hot slot whose tag equals the position",
    hints=(
        "Two indices: the block is the request (row), the thread is the lane (column). There can be "
        "more lanes than threads.",
        "r = cuda.blockIdx.x; k = cuda.threadIdx.x; while k < top_k.shape[1]: ... k += cuda.blockDim.x. "
        "A padding row (r >= num_real) writes -1; the newest position (seq_lens[r] - 1) reads "
        "locs[r, H]; otherwise search tags[r, s] for s < H.",
        "inside the loop: pos = top_k[r, k]; row = -1; if r < num_real: (if pos == seq_lens[r] - 1: "
        "row = locs[r, H]; else: for s in range(H): if tags[r, s] == pos: row = locs[r, s]; break); "
        "rows[r, k] = row",
    ),
)


# --- 14-e: the position hash's probe ----------------------------------------------------------


def hash_home(key: int, size: int) -> int:
    return ((int(key) * HASH_MULTIPLIER) & 0xFFFFFFFF) % size


def hash_table_reference(keys, size: int) -> np.ndarray:
    """The table that inserting ``keys`` in lane order builds (a repeated key keeps its first lane)."""
    table = np.full(size, HASH_EMPTY, np.int64)
    for lane, key in enumerate(keys):
        h = hash_home(key, size)
        while table[h] != HASH_EMPTY and table[h] >> LANE_BITS != key:
            h = (h + 1) % size
        if table[h] == HASH_EMPTY:
            table[h] = (int(key) << LANE_BITS) | lane
    return table


def hash_find_reference(table, key: int) -> int:
    """The lane stored with ``key``, or -1: probe from its home slot until the key or an empty entry."""
    size, h = table.size, hash_home(key, table.size)
    for _ in range(size):
        if table[h] == HASH_EMPTY:
            return -1
        if table[h] >> LANE_BITS == key:
            return int(table[h] & 0xFFFF)
        h = (h + 1) % size
    return -1


@functools.cache
def probe_kernel(hash_find_dev):
    @cuda.jit
    def find_lanes(table, size, keys, lanes):
        t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if t < keys.shape[0]:
            lanes[t] = hash_find_dev(table, size, keys[t])
    return find_lanes


def probe_case(name, about, stored, queries, size, grid=1, block=8) -> Case:
    table = hash_table_reference(stored, size)
    queries = np.array(queries, np.int64)
    want = np.array([hash_find_reference(table, q) for q in queries], np.int64)
    args = dict(table=table, size=size, keys=queries, lanes=np.full(queries.size, POISON, np.int64))
    return Case(name, grid, block, args, {"lanes": want}, about)


@functools.cache
def probe_cases():
    return [
        probe_case("the lesson's example", "6 keys in 12 entries; 3 found at home, 1 after a collision, 2 absent",
                   [5, 1, 8, 42, 9, 0], [5, 8, 0, 9, 13, 30], 12),
        probe_case("collisions", "keys 1, 9, 17, 25 share home slot 1: probe on", [1, 9, 17, 25, 6, 14],
                   [25, 17, 9, 1, 33], 12),
        probe_case("wrap around the end", "keys 3, 11, 19 share home 11, the last entry: go on at 0",
                   [3, 11, 19, 7], [19, 11, 3, 27], 12),
        probe_case("a nearly full table", "15 keys in 16 entries, every query probes far",
                   list(range(0, 30, 2))[:15], [28, 1, 30, 14], 16, 2, 2),
        probe_case("one key", "one entry", [1000], [1000], 4, 1, 1),
    ]


def _describe_query(case, name, flat):
    if name != "lanes":
        return None
    key = int(case.args["keys"][flat])
    return f"lanes[{flat}] (key {key}, home entry {hash_home(key, case.args['size'])})"


PROBE = Puzzle(
    key="14-e", cases=probe_cases, wrap=probe_kernel, describe=_describe_query,
    draw=("table", "keys", "lanes"),
    right="start at the key's Knuth home, step to the next entry (wrapping to 0) until the key or an "
          "empty entry, and return the entry's low 16 bits",
    hints=(
        "An entry packs key << 16 | lane; -1 is empty. A key lives at its home entry or further on.",
        "h = ((key * HASH_MULTIPLIER) & 0xFFFFFFFF) % size; loop: an empty entry means absent (-1); an "
        "entry whose key (entry >> 16) matches gives the lane (entry & 0xFFFF); else h + 1, back to 0 "
        "at the end.",
        "h = ((np.int64(key) * HASH_MULTIPLIER) & 0xFFFFFFFF) % size; while True: e = table[h]; "
        "if e == -1: return -1; if (e >> 16) == key: return e & 0xFFFF; h += 1; if h == size: h = 0",
    ),
)


# --- 14-f: the CLOCK victim pick --------------------------------------------------------------


@cuda.jit(device=True, inline=True)
def sample_position_dev(i, sample, miss_count, hot):
    """Ring position (after the cursor) of sample ``sample`` of miss ``i``, or -1 past its samples
    (``union_sample_positions``: miss i owns positions i, i + miss_count, ... below hot)."""
    partition = (hot - 1 - i) // miss_count + 1
    count = min(partition, CLOCK_VICTIM_SAMPLES)
    if sample >= count:
        return -1
    return i + (sample * partition // count) * miss_count


def victims_reference(ref, cursor, e_now, miss_count, ebits, width):
    """``victims[r, i]``: miss i's victim slot of request r (-1: every sample stamped); POISON past
    ``miss_count[r]``."""
    out = np.full((ref.shape[0], width), POISON, np.int32)
    for r in range(ref.shape[0]):
        for i in range(miss_count[r]):
            out[r, i] = union_victim_reference(ref[r], i, int(miss_count[r]), int(cursor[r]),
                                               ref.shape[1], int(e_now[r]), ebits)
    return out


def clock_case(name, about, ref, cursor, e_now, miss_count, ebits, block, width=None) -> Case:
    ref = np.array(ref, np.int32)
    cursor, e_now, miss_count = (np.array(a, np.int32) for a in (cursor, e_now, miss_count))
    width = width or int(max(miss_count.max(), 1))
    args = dict(ref=ref, cursor=cursor, e_now=e_now, miss_count=miss_count, ebits=ebits,
                victims=np.full((ref.shape[0], width), POISON, np.int32))
    want = victims_reference(ref, cursor, e_now, miss_count, ebits, width)
    return Case(name, ref.shape[0], block, args, {"victims": want}, about)


def _epochs(seed, requests, hot, e_now, stamped):
    rng = np.random.default_rng(seed)
    ref = rng.integers(1, e_now, size=(requests, hot)).astype(np.int32)
    for r in range(requests):
        ref[r, rng.permutation(hot)[:stamped]] = e_now
    return ref


@functools.cache
def clock_cases():
    return [
        clock_case("the lesson's example", "2 requests, H = 16, 3 and 5 misses, a few slots stamped",
                   _epochs(1, 2, 16, 40, 3), [5, 12], [40, 40], [3, 5], 8, 8),
        clock_case("one miss", "one miss samples 6 slots spread over the whole ring",
                   _epochs(2, 1, 20, 30, 4), [7], [30], [1], 8, 4),
        clock_case("every sample stamped", "all slots stamped this call: no victim, -1",
                   np.full((1, 8), 9), [3], [9], [4], 8, 4),
        clock_case("epochs wrapped", "4-bit epochs, e_now = 2: a slot stamped 15 is older than one stamped 1",
                   [[1, 15, 14, 2, 1, 0, 3, 15]], [0], [2], [2], 4, 4),
        clock_case("ties", "equal epochs everywhere: the first sample wins", np.full((1, 12), 5),
                   [10], [7], [3], 8, 4),
        clock_case("more misses than threads", "12 misses, 4 threads; a request without misses",
                   _epochs(3, 2, 32, 100, 5), [0, 30], [100, 100], [12, 0], 8, 4),
    ]


def _describe_victim(case, name, flat):
    if name != "victims":
        return None
    r, i = divmod(flat, case.args["victims"].shape[1])
    hot = case.args["ref"].shape[1]
    count = int(case.args["miss_count"][r])
    if i >= count:
        return f"victims[{r}, {i}] (request {r} has only {count} misses)"
    cursor = int(case.args["cursor"][r])
    slots = [(cursor + p) % hot for p in union_sample_positions(i, count, hot)]
    return f"victims[{r}, {i}] (miss {i} of request {r}; its samples are slots {slots})"


CLOCK = Puzzle(
    key="14-f", cases=clock_cases, describe=_describe_victim,
    work={"victims": ("write", lambda c: -(-c.args["victims"].shape[1] // c.block))},
    draw=("ref", "victims"),
    right="each miss takes the oldest of its samples that this call has not stamped (ages modulo "
          "2^ebits, the first on a tie), or -1",
    hints=(
        "Block r is request r; thread i handles miss i (and i + blockDim.x, ... when there are more "
        "misses than threads). sample_position_dev gives the miss's samples, -1 after the last.",
        "For each sample: slot = (cursor[r] + position) % H. Skip a slot with ref[r, slot] == e_now[r] "
        "(stamped this call). Its age is (e_now - ref) & ((1 << ebits) - 1); keep the largest, the "
        "first one on a tie (compare with >, start from age -1 and slot -1).",
        "best = -1; best_age = -1; for s in range(6): p = sample_position_dev(i, s, m, H); if p < 0: "
        "break; slot = (cursor[r] + p) % H; if ref[r, slot] != e_now[r]: age = (e_now[r] - ref[r, slot]) "
        "& mask; if age > best_age: best, best_age = slot, age; then victims[r, i] = best",
    ),
)
