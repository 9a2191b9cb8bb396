"""Lesson 15's scan puzzles: number the misses, write the miss plan, check the verify capacity.

* ``SCAN`` (15-e): ``number_misses(is_miss, miss_rank, miss_total)``, a block per row: a block-wide
  exclusive prefix sum in shared memory (Hillis-Steele, barriers between reading and writing):
  ``miss_rank[r, k]`` = misses before lane ``k`` (``-1`` for a hit), ``miss_total[r]``.
  ``is_miss`` ``[R, K]`` int32, ``miss_rank`` ``[R, K]`` int64, ``miss_total`` ``[R]`` int64.
* ``PLAN`` (15-f): ``write_miss_plan(is_miss, top_k, req_pool_indices, host_locs, device_locs,
  evict, num_real, miss_src, miss_dst, miss_count)``: the last step of the single-step swap-in: the
  m-th miss (``block_exclusive_scan_dev``, given) takes evictable slot ``evict[b, m]`` and records
  ``(host row, device row)`` in the plan. Reference: ``miss_plan_reference``, which agrees with
  ``load_cache_to_device_buffer_mla_reference`` (``plan_inputs`` derives the inputs from a problem).
* ``CAPACITY`` (15-g): ``verify_capacity_kernel(req_pool_indices, prefix_lens, swa_window_size,
  verify_capacity, verify_offsets, verify_num_valid, enable)``: the kv-canary plan's verify
  offsets, and whether they fit. Reference: the plan reference (``kv_canary.examples.run_plan``).
"""

from __future__ import annotations

import functools

import numpy as np

from ...hisparse.single_step.examples import make_swap_in_problem
from ...kv_canary.examples import plan_problem, run_plan
from .harness import POISON, Case, Puzzle

SCAN_MAX = 16                    # the scan's shared array: blocks of up to 16 threads


def _each(*names):
    return {n: ("read", 1) for n in names}


# --- 15-e: the block scan that numbers misses -------------------------------------------------


def miss_numbers_reference(is_miss):
    """``(rank of each miss among the misses before it in its row, -1 for a hit; misses per row)``."""
    is_miss = np.atleast_2d(np.asarray(is_miss, np.int64))
    exclusive = np.cumsum(is_miss, axis=1) - is_miss
    return np.where(is_miss == 1, exclusive, -1).astype(np.int64), is_miss.sum(axis=1).astype(np.int64)


def scan_case(name, about, is_miss, block) -> Case:
    is_miss = np.atleast_2d(np.array(is_miss, np.int32))
    rank, total = miss_numbers_reference(is_miss)
    args = dict(is_miss=is_miss, miss_rank=np.full(is_miss.shape, POISON, np.int64),
                miss_total=np.full(is_miss.shape[0], POISON, np.int64))
    return Case(name, is_miss.shape[0], block, args, {"miss_rank": rank, "miss_total": total}, about)


@functools.cache
def scan_cases():
    rng = np.random.default_rng(5)
    return [
        scan_case("the lesson's example", "16 lanes, 16 threads",
                  [0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1], 16),
        scan_case("lanes not a multiple of the block", "12 lanes, 16 threads: threads 12-15 add 0",
                  [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0], 16),
        scan_case("all misses", "16 lanes, all missing", [1] * 16, 16),
        scan_case("all hits", "16 lanes, none missing", [0] * 16, 16),
        scan_case("one lane", "K = 1, 4 threads", [1], 4),
        scan_case("three rows", "3 rows of 16 lanes, 16 threads", rng.integers(0, 2, (3, 16)), 16),
    ]


def _describe_rank(case, name, flat):
    if name != "miss_rank":
        return None
    r, k = divmod(flat, case.args["is_miss"].shape[1])
    row = case.args["is_miss"][r]
    what = f"a miss with {int(row[:k].sum())} misses before it" if row[k] else "a hit"
    return f"miss_rank[{r}, {k}] (row {r}, lane {k}: {what})"


SCAN = Puzzle(
    key="15-e", cases=scan_cases, cooperative=True, describe=_describe_rank,
    work={**_each("is_miss"), "miss_rank": ("write", 1)}, draw=("is_miss", "miss_rank", "miss_total"),
    right="log2(blockDim) rounds of add-the-value-offset-to-the-left, every thread at every barrier, a barrier "
          "between reading and writing; the exclusive rank is the inclusive sum minus your own value",
    hints=(
        "Each round every thread reads one cell and writes its own: all reads of a round must happen before "
        "any write of that round. Threads without a lane add 0 but still take part.",
        "s[t] = mine; sync; for offset = 1, 2, 4, ... < blockDim.x: add = s[t - offset] if t >= offset "
        "else 0; sync; s[t] += add; sync. Then s[t] is the inclusive sum; miss_rank = s[t] - mine for a "
        "miss; the row total is s[blockDim.x - 1].",
        "mine = is_miss[r, t] if t < K else 0; s[t] = mine; cuda.syncthreads(); offset = 1; while offset < "
        "n: add = 0; if t >= offset: add = s[t - offset]; cuda.syncthreads(); s[t] += add; "
        "cuda.syncthreads(); offset *= 2  /  if t < K: miss_rank[r, t] = s[t] - mine if mine else -1  /  "
        "if t == n - 1: miss_total[r] = s[t]",
    ),
)


# --- 15-f: the miss plan ----------------------------------------------------------------------


def miss_plan_reference(is_miss, top_k, req_pool_indices, host_locs, device_locs, evict, num_real):
    """``(miss_src, miss_dst, miss_count)``: the m-th miss (lane order) of real row ``b`` copies host
    row ``host_locs[rid, top_k[b, lane]]`` to ``device_locs[rid, evict[b, m]]``; POISON elsewhere
    (a padding row's plan is not written)."""
    B, K = top_k.shape
    src, dst = np.full((B, K), POISON, np.int64), np.full((B, K), POISON, np.int32)
    count = np.full(B, POISON, np.int32)
    for b in range(min(num_real, B)):
        rid = int(req_pool_indices[b])
        lanes = np.flatnonzero(is_miss[b])
        src[b, :lanes.size] = host_locs[rid, top_k[b, lanes]]
        dst[b, :lanes.size] = device_locs[rid, evict[b, :lanes.size]]
        count[b] = lanes.size
    return src, dst, count


def plan_inputs(problem: dict) -> dict:
    """The miss plan's inputs for a single-step swap-in ``problem``: per batch row the lanes that miss
    and the evictable slots in LRU order, as ``load_cache_to_device_buffer_mla_reference`` finds them."""
    t, rids = problem["top_k_tokens"], problem["req_pool_indices"]
    H, (B, K) = problem["hot_buffer_size"], t.shape
    num_real = int(problem["num_real_reqs"][0]) if problem.get("num_real_reqs") is not None else B
    is_miss, evict = np.ones((B, K), np.int32), np.zeros((B, K), np.int32)
    for b in range(num_real):
        rid, seq_len = int(rids[b]), int(problem["seq_lens"][b])
        if seq_len <= H:                             # the fast path: position p lives in slot p
            is_miss[b] = 0
            continue
        order = problem["lru_slots"][rid, :H].astype(np.int64)
        slot_tags = problem["device_buffer_tokens"][rid][order]
        hit = (slot_tags >= 0) & (slot_tags != seq_len - 1) & np.isin(slot_tags, t[b])
        is_miss[b] = ~((t[b] == seq_len - 1) | np.isin(t[b], slot_tags[hit]))
        evictable = order[~hit][:K]
        evict[b, :evictable.size] = evictable
    return dict(is_miss=is_miss, top_k=t.astype(np.int32), req_pool_indices=rids.astype(np.int32),
                host_locs=problem["host_cache_locs"].astype(np.int64),
                device_locs=problem["device_buffer_locs"].astype(np.int32), evict=evict, num_real=num_real)


def plan_case(name, about, inputs: dict, block) -> Case:
    src, dst, count = miss_plan_reference(**inputs)
    B, K = inputs["top_k"].shape
    args = dict(inputs, miss_src=np.full((B, K), POISON, np.int64), miss_dst=np.full((B, K), POISON, np.int32),
                miss_count=np.full(B, POISON, np.int32))
    return Case(name, B, block, args, {"miss_src": src, "miss_dst": dst, "miss_count": count}, about)


def synthetic_inputs(seed, is_miss, num_real=None, hot=16):
    """Random distinct positions, request rows, host rows and device rows around given miss flags."""
    rng = np.random.default_rng(seed)
    is_miss = np.array(is_miss, np.int32)
    B, K = is_miss.shape
    requests = B + 2
    return dict(is_miss=is_miss, top_k=np.stack([rng.permutation(64)[:K] for _ in range(B)]).astype(np.int32),
                req_pool_indices=rng.permutation(requests)[:B].astype(np.int32),
                host_locs=rng.permutation(requests * 64).reshape(requests, 64).astype(np.int64),
                device_locs=rng.permutation(requests * (hot + 1)).reshape(requests, hot + 1).astype(np.int32),
                evict=np.stack([rng.permutation(hot)[:K] for _ in range(B)]).astype(np.int32),
                num_real=B if num_real is None else num_real)


@functools.cache
def plan_cases():
    real = make_swap_in_problem(np.random.default_rng(6), batch=3, num_top_k=8, hot_buffer_size=16,
                                fast_rows=1, record_plan=False)
    wide = make_swap_in_problem(np.random.default_rng(7), batch=2, num_top_k=12, hot_buffer_size=24,
                                fast_rows=0, record_plan=False)
    return [
        plan_case("a real swap-in step", "3 rows of 8 lanes (the last on the fast path: no misses), 8 threads",
                  plan_inputs(real), 8),
        plan_case("lanes not a multiple of the block", "2 rows of 12 lanes, 16 threads", plan_inputs(wide), 16),
        plan_case("all misses", "2 rows of 8 lanes, all missing", synthetic_inputs(1, np.ones((2, 8))), 8),
        plan_case("all hits", "2 rows of 8 lanes, none missing: count 0", synthetic_inputs(2, np.zeros((2, 8))), 8),
        plan_case("padding rows", "3 rows, num_real = 1: rows 1 and 2 hold garbage and write nothing",
                  synthetic_inputs(3, np.ones((3, 6)), num_real=1), 8),
        plan_case("one lane", "1 row, K = 1, 2 threads", synthetic_inputs(4, [[1]]), 2),
    ]


PLAN = Puzzle(
    key="15-f", cases=plan_cases, cooperative=True,
    work={**_each("is_miss"), "miss_src": ("write", 1)}, draw_shared=False,
    draw=("is_miss", "evict", "miss_src", "miss_dst", "miss_count"),
    right="the scan numbers the misses, the m-th miss takes evictable slot m and records (host row, device "
          "row) of its request, and a padding row (the whole block returns together) writes nothing",
    hints=(
        "Every real row's threads scan their miss flags together; a miss's rank m says which evictable slot "
        "it takes and which plan column it writes.",
        "A padding row (b >= num_real) returns before the scan: the whole block takes that return, so no "
        "barrier is left half-reached. count = 1 for a missing lane; m, total = block_exclusive_scan_dev(...) "
        "in every thread; rid = req_pool_indices[b]: host_locs and device_locs are indexed by rid, not b.",
        "if b >= num_real: return  /  count = 1 if t < K and is_miss[b, t] == 1 else 0  /  m, total = "
        "block_exclusive_scan_dev(s_scan, count, t, cuda.blockDim.x)  /  if count == 1: rid = ...; "
        "miss_src[b, m] = host_locs[rid, top_k[b, t]]; miss_dst[b, m] = device_locs[rid, evict[b, m]]  /  "
        "if t == 0: miss_count[b] = total",
    ),
)


# --- 15-g: the verify capacity ----------------------------------------------------------------

PLAN_THREADS = 32


def capacity_reference(rpi, prefix, swa, cap):
    """(exclusive verify offsets of the rows + total, verify_num_valid, enable) from the plan reference."""
    problem = plan_problem(rpi, prefix, [1] * len(rpi), max_seq_len=32, swa_window_size=swa,
                           full_to_swa_index_mapping=np.arange(8 * 32, dtype=np.int64) if swa else None)
    plan = run_plan(problem, cap, len(rpi), kernel=False)
    counts = [0 if rp == 0 else max(p - (max(p - swa, 0) if swa > 0 else 0), 0) for rp, p in zip(rpi, prefix)]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    assert offsets[-1] == problem.needed_verify_entries()
    return offsets, plan["verify_num_valid"].astype(np.int32), plan["enable"].astype(np.int32)


def capacity_case(name, about, rpi, prefix, swa, cap) -> Case:
    offsets, num_valid, enable = capacity_reference(rpi, prefix, swa, cap)
    args = dict(req_pool_indices=np.array(rpi, np.int64), prefix_lens=np.array(prefix, np.int64),
                swa_window_size=swa, verify_capacity=cap,
                verify_offsets=np.full(len(rpi) + 1, POISON, np.int64),
                verify_num_valid=np.full(1, POISON, np.int32), enable=np.full(1, POISON, np.int32))
    want = {"verify_offsets": offsets, "verify_num_valid": num_valid, "enable": enable}
    return Case(name, 1, PLAN_THREADS, args, want, about)


@functools.cache
def capacity_cases():
    rpi, prefix = [3, 0, 1, 2, 0, 5], [6, 4, 9, 0, 2, 3]          # rows 1 and 4 are padding rows
    return [
        capacity_case("fits", "6 rows (1 and 4 padding), capacity 32", rpi, prefix, 0, 32),
        capacity_case("fits exactly", "a sliding window of 4, capacity 11 = the total", rpi, prefix, 4, 11),
        capacity_case("overflows", "total 18, capacity 17: not enabled", rpi, prefix, 0, 17),
        capacity_case("all padding rows", "3 padding rows: nothing to verify", [0, 0, 0], [5, 6, 7], 0, 4),
        capacity_case("one row", "1 row of 3 entries, capacity 2: not enabled", [1], [3], 0, 2),
        capacity_case("a window longer than the prefix", "window 10, prefixes 3 and 12",
                      [1, 2, 3], [3, 12, 0], 10, 20),
        capacity_case("a full block", "32 rows, one per thread", list(range(1, 33)), [1] * 32, 0, 40),
    ]


def _describe_capacity(case, name, flat):
    if name == "verify_offsets":
        rows = case.args["req_pool_indices"].size
        if flat == rows:
            return f"verify_offsets[{flat}] (the total)"
        padding = " (a padding row)" if case.args["req_pool_indices"][flat] == 0 else ""
        return f"verify_offsets[{flat}] (row {flat}{padding}, prefix {case.args['prefix_lens'][flat]})"
    return None


CAPACITY = Puzzle(
    key="15-g", cases=capacity_cases, cooperative=True, describe=_describe_capacity, draw_shared=False,
    work=_each("prefix_lens", "req_pool_indices"),
    draw=("req_pool_indices", "prefix_lens", "verify_offsets", "verify_num_valid", "enable"),
    right="padding rows verify nothing, a sliding window verifies only its last W positions, every thread "
          "calls the scan, and the plan is enabled only when the total fits (equal is fine)",
    hints=(
        "Each thread counts its row's verify entries; a scan turns counts into offsets; thread 0 writes "
        "what is left. Every thread of the block must call the scan: it holds barriers.",
        "count = prefix - window_start for a real row (req_pool_indices != 0) below bs, where window_start "
        "= max(prefix - W, 0) if W > 0 else 0; 0 otherwise. offset, total = block_exclusive_scan_dev(...); "
        "verify_offsets[tid] = offset for tid < bs, verify_offsets[bs] = total; num_valid = min(total, cap), "
        "enable = total <= cap.",
        "count = 0; if tid < bs and req_pool_indices[tid] != 0: start = max(prefix_lens[tid] - W, 0) if W > 0 "
        "else 0; count = max(prefix_lens[tid] - start, 0)  /  offset, total = block_exclusive_scan_dev(s_scan, "
        "count, tid, cuda.blockDim.x)  /  if tid < bs: verify_offsets[tid] = offset  /  if tid == 0: "
        "verify_offsets[bs] = total; verify_num_valid[0] = min(total, verify_capacity); enable[0] = 1 if "
        "total <= verify_capacity else 0",
    ),
)
