"""Checkers for lesson 14, kernel puzzles I: one thread, one piece of work.

Six puzzles, each a real piece of this project's kernels, easiest first:

* a ``check_gather_guard``: the gather's bounds guard (one thread per word, grids in whole blocks);
* b ``check_chunk_loop``: the 16-byte chunk loop of an item copy (``itemcopy.py``);
* c ``check_hit_test``: the swap-in's hit test, one block per request row (2-D indexing);
* d ``check_chain_step``: the kv-canary hash chain step (64-bit unsigned arithmetic);
* e ``check_hash_probe``: the probe of the swap-in's position hash (Knuth's hash, linear probing);
* f ``check_clock_victim``: the speculative swap-in's CLOCK victim (oldest epoch, stamped skipped).

Each ``check_x(kernel)`` runs the learner's code on several named cases (sizes that are not a
multiple of the block, one element, several blocks, padding rows, all hits, all misses...) with
outputs pre-filled with a poison value, and prints ``right:``, ``wrong: case "..." ...`` or
``not yet:`` (``puzzles.harness``). ``show_x(kernel)`` draws the kernel's accesses on one case,
right or wrong (or, for a stub, what the reference writes). ``hint(letter, level)``: levels 1-3.
Lesson 15 (``ex15``) continues with threads that cooperate.
"""

from __future__ import annotations

from .puzzles import checker, harness, pictures
from .puzzles.maps import CHAIN, CHUNKS, GATHER
from .puzzles.rows import (CLOCK, HITS, PROBE, hash_find_reference, hash_table_reference,
                           hit_rows_reference, sample_position_dev)

__all__ = ["PUZZLES", "check_chain_step", "check_chunk_loop", "check_clock_victim", "check_gather_guard",
           "check_hash_probe", "check_hit_test", "hash_find_reference", "hash_table_reference", "hint",
           "hit_rows_reference", "sample_position_dev"]

PUZZLES = {"a": GATHER, "b": CHUNKS, "c": HITS, "d": CHAIN, "e": PROBE, "f": CLOCK}
SOLUTIONS = "lessons/solutions/14.py"


def check_gather_guard(gather_words):
    """``gather_words(src_words, dst_words, src_locs, dst_locs, words_per_item)``: a thread per word."""
    return checker.check(GATHER, gather_words)


def check_chunk_loop(copy_item_dev):
    """``copy_item_dev(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes)``."""
    return checker.check(CHUNKS, copy_item_dev)


def check_hit_test(hit_rows):
    """``hit_rows(tags, locs, top_k, seq_lens, num_real, hot_buffer_size, rows)``: a block per request."""
    return checker.check(HITS, hit_rows)


def check_chain_step(mix3_dev):
    """``mix3_dev(prev_hash, token, position) -> uint64``: ``H(H(H(prev) ^ token) ^ position)``."""
    return checker.check(CHAIN, mix3_dev)


def check_hash_probe(hash_find_dev):
    """``hash_find_dev(table, size, key) -> lane or -1`` over the swap-in's position hash."""
    return checker.check(PROBE, hash_find_dev)


def check_clock_victim(pick_victims):
    """``pick_victims(ref, cursor, e_now, miss_count, ebits, victims)``: a block per request."""
    return checker.check(CLOCK, pick_victims)


def show_gather_guard(gather_words, case=None):
    pictures.show(GATHER, gather_words, case)


def show_chunk_loop(copy_item_dev, case=None):
    pictures.show(CHUNKS, copy_item_dev, case)


def show_hit_test(hit_rows, case=None):
    pictures.show(HITS, hit_rows, case)


def show_chain_step(mix3_dev, case=None):
    pictures.show(CHAIN, mix3_dev, case)


def show_hash_probe(hash_find_dev, case=None):
    pictures.show(PROBE, hash_find_dev, case)


def show_clock_victim(pick_victims, case=None):
    pictures.show(CLOCK, pick_victims, case)


def hint(letter: str, level: int = 1) -> None:
    """Hint ``level`` of puzzle ``letter``: 1 a nudge, 2 the idea, 3 nearly the code."""
    harness.hint(PUZZLES, SOLUTIONS, letter, level)
