"""Checkers for lesson 15, kernel puzzles II: threads that share memory, vote, claim and wait.

Seven puzzles, each a real piece of this project's kernels, easiest first:

* a ``check_stage_row``: stage a row in shared memory, barrier, read a neighbour (unique positions);
* b ``check_warp_vote``: ``cuda.any_sync``/``ballot_sync``: does any lane of a request miss, which;
* c ``check_atomic_claim``: claim an entry of a work list with ``cuda.atomic.add``;
* d ``check_position_hash``: the swap-in's position hash, built in shared memory with ``cuda.atomic.cas``;
* e ``check_miss_scan``: the block-wide exclusive scan that numbers misses;
* f ``check_miss_plan``: the miss plan: the m-th miss takes evictable slot m, writes (src, dst);
* g ``check_verify_capacity``: the kv-canary plan's verify capacity check, inside a kernel.

Every case runs through ``racecheck`` in the simulator: a race, a barrier that not every thread
reaches or a read of shared memory nobody wrote is ``wrong:`` with racecheck's sentence (which
threads, which element, which lines, where the barrier goes), on every run. Otherwise as lesson
14 (``ex14``): named cases with poisoned outputs, ``show_x(kernel)`` draws (by barrier interval),
``hint(letter, level)``. In the simulator the warp votes come from ``puzzles.warp_votes``.
"""

from __future__ import annotations

from .puzzles import checker, harness, pictures, warp_votes
from .puzzles.cooperate import CLAIM, HASH, STAGE, VOTE
from .puzzles.scans import (CAPACITY, PLAN, SCAN, SCAN_MAX, miss_numbers_reference, miss_plan_reference,
                            plan_inputs)

__all__ = ["PUZZLES", "SCAN_MAX", "check_atomic_claim", "check_miss_plan", "check_miss_scan",
           "check_position_hash", "check_stage_row", "check_verify_capacity", "check_warp_vote", "hint",
           "miss_numbers_reference", "miss_plan_reference", "plan_inputs"]

warp_votes.install()

PUZZLES = {"a": STAGE, "b": VOTE, "c": CLAIM, "d": HASH, "e": SCAN, "f": PLAN, "g": CAPACITY}
SOLUTIONS = "lessons/solutions/15.py"


def check_stage_row(mark_first):
    """``mark_first(sorted_pos, first)``: a block per row, the row staged in shared memory."""
    return checker.check(STAGE, mark_first)


def check_warp_vote(vote_misses):
    """``vote_misses(rows, num_real, any_miss, miss_mask)``: a warp of 32 threads per request."""
    return checker.check(VOTE, vote_misses)


def check_atomic_claim(claim_slots):
    """``claim_slots(is_miss, claimed, count)``: a thread per lane, several blocks."""
    return checker.check(CLAIM, claim_slots)


def check_position_hash(build_position_hash):
    """``build_position_hash(top_k, table, inserted)``: a block per row, the table in shared memory."""
    return checker.check(HASH, build_position_hash)


def check_miss_scan(number_misses):
    """``number_misses(is_miss, miss_rank, miss_total)``: a block per row."""
    return checker.check(SCAN, number_misses)


def check_miss_plan(write_miss_plan):
    """``write_miss_plan(is_miss, top_k, req_pool_indices, host_locs, device_locs, evict, num_real,
    miss_src, miss_dst, miss_count)``: a block per batch row."""
    return checker.check(PLAN, write_miss_plan)


def check_verify_capacity(verify_capacity_kernel):
    """``verify_capacity_kernel(req_pool_indices, prefix_lens, swa_window_size, verify_capacity,
    verify_offsets, verify_num_valid, enable)`` with one block of 32 threads."""
    return checker.check(CAPACITY, verify_capacity_kernel)


def show_stage_row(kernel, case=None):
    pictures.show(STAGE, kernel, case)


def show_warp_vote(kernel, case=None):
    pictures.show(VOTE, kernel, case)


def show_atomic_claim(kernel, case=None):
    pictures.show(CLAIM, kernel, case)


def show_position_hash(kernel, case=None):
    pictures.show(HASH, kernel, case)


def show_miss_scan(kernel, case=None):
    pictures.show(SCAN, kernel, case)


def show_miss_plan(kernel, case=None):
    pictures.show(PLAN, kernel, case)


def show_verify_capacity(kernel, case=None):
    pictures.show(CAPACITY, kernel, case)


def hint(letter: str, level: int = 1) -> None:
    """Hint ``level`` of puzzle ``letter``: 1 a nudge, 2 the idea, 3 nearly the code."""
    harness.hint(PUZZLES, SOLUTIONS, letter, level)
