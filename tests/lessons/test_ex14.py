"""Lesson 14's puzzle checkers: right for right kernels, wrong (saying where) for plausible wrong ones."""

import matplotlib
import pytest

from hisparse_numba import compile_check, device
from hisparse_numba.hisparse.single_step.examples import copy_problem  # noqa: F401
from hisparse_numba.lessons import ex14

from . import puzzle_kernels as k

matplotlib.use("Agg")
COMPILE_TOOLCHAIN_MISSING = compile_check.compile_toolchain_missing()


def _verdict(capsys, ok, expected, words=()):
    out = capsys.readouterr().out
    assert ok is expected, out
    assert out.startswith("right" if expected else "wrong"), out
    for w in words:
        assert w in out, out


CASES = [
    (ex14.check_gather_guard, k.gather_right, True, ()),
    (ex14.check_gather_guard, k.gather_unguarded, False, ("your thread (1, ",)),
    (ex14.check_gather_guard, k.gather_guard_on_pairs_off_by_one, False, ("your thread (1, ",)),
    (ex14.check_gather_guard, k.gather_guard_on_threads_of_a_block, False, ("no thread wrote",)),
    (ex14.check_chunk_loop, k.chunks_right, True, ()),
    (ex14.check_chunk_loop, k.chunks_by_word, False, ("both words",)),
    (ex14.check_chunk_loop, k.chunks_step_one, False, ("written by threads",)),
    (ex14.check_chunk_loop, k.chunks_one_round, False, ("no thread wrote word", "chunk 4")),
    (ex14.check_hit_test, k.find_right, True, ()),
    (ex14.check_hit_test, k.find_including_newest_column, False, ("column H",)),
    (ex14.check_hit_test, k.find_request_zero, False, ("another request",)),
    (ex14.check_hit_test, k.find_returns_last_slot, False, ("rows[",)),
    (ex14.check_miss_scan, k.scan_right, True, ()),
    (ex14.check_miss_scan, k.scan_inclusive, False, ("miss_rank[1]",)),
    (ex14.check_miss_scan, k.scan_one_round, False, ("misses before it",)),
    (ex14.check_miss_scan, k.scan_total_from_thread_zero, False, ("miss_total",)),
    (ex14.check_chain_step, k.mix3_right, True, ()),
    (ex14.check_chain_step, k.mix3_xor_first, False, ("next_hash[0]",)),
    (ex14.check_chain_step, k.mix3_position_first, False, ("next_hash[",)),
    (ex14.check_chain_step, k.mix3_no_cast, False, ()),
    (ex14.check_verify_capacity, k.capacity_right, True, ()),
    (ex14.check_verify_capacity, k.capacity_counts_padding, False, ("verify_offsets[2]",)),
    (ex14.check_verify_capacity, k.capacity_ignores_window, False, ("swa_window_size 4",)),
    (ex14.check_verify_capacity, k.capacity_strict, False, ("enable[0]",)),
]


@pytest.mark.parametrize("check,kernel,expected,words", CASES,
                         ids=[f"{c.__name__}-{getattr(kn, '__name__', '')}" for c, kn, _, _ in CASES])
def test_puzzle(capsys, check, kernel, expected, words):
    if not device.SIMULATOR:
        words = [w for w in words if "thread" not in w and "column H" not in w and "another" not in w]
        if kernel in (k.chunks_by_word, k.chunks_step_one):
            pytest.skip("only the simulator sees which thread wrote a chunk; the bytes are right")
    _verdict(capsys, check(kernel), expected, words)


def test_stub_is_not_yet(capsys):
    assert not ex14.check_gather_guard(k.gather_stub)
    assert capsys.readouterr().out.startswith("not yet")


@pytest.mark.skipif(not device.SIMULATOR, reason="a kernel's own exception surfaces only in the simulator")
def test_learner_kernel_error_is_theirs(capsys):
    assert not ex14.check_chain_step(k.mix3_no_cast)
    out = capsys.readouterr().out
    assert "your kernel raised" in out and "line" in out, out


def test_hit_reference_agrees_with_the_cases():
    tags, locs, top_k, seq_lens = ex14.hit_case()
    assert ex14.hit_rows_reference(tags, locs, top_k, seq_lens).tolist() == [[0, 1, 8, -1], [-1, 11, -1, 13]]


def test_miss_numbers_reference():
    rank, total = ex14.miss_numbers_reference([0, 1, 1, 0, 1])
    assert rank.tolist() == [-1, 0, 1, -1, 2] and total.tolist() == [3]


@pytest.mark.skipif(COMPILE_TOOLCHAIN_MISSING is not None, reason=COMPILE_TOOLCHAIN_MISSING or "")
def test_right_answers_compile_for_the_gpu():
    """The puzzles' right answers (and the checkers' kernels around them) compile to PTX for sm_90."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = """
import matplotlib; matplotlib.use("Agg")
from hisparse_numba import device
from hisparse_numba.lessons import ex14
from tests.lessons import puzzle_kernels as k
for check, kernel in [(ex14.check_gather_guard, k.gather_right), (ex14.check_chunk_loop, k.chunks_right),
                      (ex14.check_hit_test, k.find_right), (ex14.check_miss_scan, k.scan_right),
                      (ex14.check_chain_step, k.mix3_right), (ex14.check_verify_capacity, k.capacity_right)]:
    check(kernel)
print("compiled", len(device.compiled_signatures))
"""
    env = dict(os.environ, HISPARSE_NUMBA_BACKEND="compile-only", PYTHONPATH=str(root))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "raised" not in out.stdout and "compiled 6" in out.stdout, out.stdout
