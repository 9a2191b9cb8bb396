"""Lesson 15's puzzle checkers: the solutions are right on every case; every plausible wrong answer
(``wrong_answers/l15_*``) is wrong with the words that name it, races and divergent barriers by
name on every one of 20 runs; stubs are ``not yet``; every puzzle draws; hints in three levels; the
simulator's warp votes behave like a GPU's."""

import matplotlib
import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.device import cuda
from hisparse_numba.lessons import ex15
from hisparse_numba.lessons.puzzles import pictures

from . import puzzle_kernels as k
from .puzzle_kernels import close_figures  # noqa: F401 - an autouse fixture
from .verdicts import assert_verdict

matplotlib.use("Agg")

CHECKS = {"a": ex15.check_stage_row, "b": ex15.check_warp_vote, "c": ex15.check_atomic_claim,
          "d": ex15.check_position_hash, "e": ex15.check_miss_scan, "f": ex15.check_miss_plan,
          "g": ex15.check_verify_capacity}
SHOWS = {"a": ex15.show_stage_row, "b": ex15.show_warp_vote, "c": ex15.show_atomic_claim,
         "d": ex15.show_position_hash, "e": ex15.show_miss_scan, "f": ex15.show_miss_plan,
         "g": ex15.show_verify_capacity}
SOLVED_NAMES = {"a": "mark_first", "b": "vote_misses", "c": "claim_slots", "d": "build_position_hash",
                "e": "number_misses", "f": "write_miss_plan", "g": "verify_capacity_kernel"}
WRONG = [(key, name, w) for key, entries in sorted(k.WRONG.items()) if key.startswith("15-")
         for name, w in entries]


def test_the_ramp_has_seven_puzzles_each_with_several_cases():
    assert sorted(ex15.PUZZLES) == list("abcdefg")
    for letter, puzzle in ex15.PUZZLES.items():
        names = [c.name for c in puzzle.cases()]
        assert len(names) >= 5 and len(set(names)) == len(names), (letter, names)
        assert puzzle.cooperative, letter


def test_every_solution_is_right():
    _, printed = k.solved("15")
    assert sorted(printed) == [f"15-{x}" for x in "abcdefg"]
    for exercise, out in printed.items():
        assert out.startswith("right: all "), (exercise, out)


@pytest.mark.parametrize("key,name,answer", WRONG, ids=[f"{key}-{name}" for key, name, _ in WRONG])
def test_wrong_answer_is_rejected_by_name(capsys, monkeypatch, key, name, answer):
    if answer.simulator_only and not device.SIMULATOR:
        pytest.skip("only the simulator's trace and race check see this mistake")
    check = CHECKS[key[-1]]
    for run in range(answer.runs):
        out = assert_verdict(capsys, check(answer.kernel), "wrong", *answer.words(device.SIMULATOR))
        if answer.runs > 1:
            assert "race" in out or "barrier" in out, out
        monkeypatch.setattr(pictures, "draw_run", lambda *args, **kwargs: None)   # drawn once is enough


def test_every_puzzle_has_wrong_answers_and_a_race():
    assert {key for key, _, _ in WRONG} == {f"15-{x}" for x in "abcdefg"}
    racy = {key for key, _, w in WRONG if w.runs > 1}
    assert racy == {f"15-{x}" for x in "abcdefg"}, racy


@pytest.mark.parametrize("letter", list("abcdefg"))
def test_stub_is_not_yet(capsys, letter):
    assert_verdict(capsys, CHECKS[letter](k.kernel_stub), "not yet")


@pytest.mark.parametrize("letter", list("abcdefg"))
def test_every_puzzle_draws_right_answers_and_stubs(capsys, letter):
    namespace, _ = k.solved("15")
    SHOWS[letter](namespace[SOLVED_NAMES[letter]])
    title = k.last_title()
    assert "(right)" in title if device.SIMULATOR else "the reference writes" in title
    SHOWS[letter](k.kernel_stub)
    assert "the reference writes" in k.last_title()


@pytest.mark.skipif(not device.SIMULATOR, reason="the shared-memory picture is the simulator's")
def test_the_picture_draws_shared_memory_by_barrier_interval(capsys):
    import matplotlib.pyplot as plt

    namespace, _ = k.solved("15")
    ex15.show_miss_scan(namespace["number_misses"])
    titles = " ".join(ax.get_title() for ax in plt.gcf().axes)
    assert "s [" in titles or "s[" in titles, titles
    assert "interval 1" in titles, titles


def test_hints_come_in_three_levels(capsys):
    for letter in ex15.PUZZLES:
        texts = []
        for level in (1, 2, 3):
            ex15.hint(letter, level)
            texts.append(capsys.readouterr().out)
        assert len(set(texts)) == 3, letter
        assert "lessons/solutions/15.py" in texts[2]


def test_outputs_start_poisoned():
    for puzzle in ex15.PUZZLES.values():
        for case in puzzle.cases():
            for name in case.want:
                assert k.all_poison(case.args[name]) or name == "count", (puzzle.key, case.name, name)


def test_the_miss_plan_reference_agrees_with_the_swap_in_reference():
    from hisparse_numba.hisparse.single_step.examples import make_swap_in_problem
    from hisparse_numba.hisparse.single_step import load_cache_to_device_buffer_mla_reference

    for seed in range(4):
        p = make_swap_in_problem(np.random.default_rng(seed), batch=4, num_top_k=8, hot_buffer_size=16,
                                 fast_rows=1, num_real=3)
        p["miss_src"][...], p["miss_dst"][...], p["miss_count"][...] = -7, -7, -7
        src, dst, count = ex15.miss_plan_reference(**ex15.plan_inputs(p))
        load_cache_to_device_buffer_mla_reference(**p)
        for b in range(3):
            m = p["miss_count"][b]
            assert count[b] == m, (seed, b)
            assert np.array_equal(src[b, :m], p["miss_src"][b, :m]) and np.array_equal(dst[b, :m], p["miss_dst"][b, :m])


def test_the_scan_reference_numbers_misses():
    rank, total = ex15.miss_numbers_reference([[0, 1, 1, 0, 1]])
    assert rank.tolist() == [[-1, 0, 1, -1, 2]] and total.tolist() == [3]


@cuda.jit
def votes(values, out_any, out_all, out_ballot, out_active):
    t = cuda.threadIdx.x
    flag = values[t] > 0
    a = cuda.any_sync(0xFFFFFFFF, flag)
    b = cuda.all_sync(0xFFFFFFFF, flag)
    c = cuda.ballot_sync(0xFFFFFFFF, flag)
    out_any[t], out_all[t], out_ballot[t], out_active[t] = a, b, c, cuda.activemask()


def test_warp_votes_match_a_gpu():
    values = np.zeros(64, np.int32)
    values[[3, 17, 40]] = 1
    values[32:] += 1                            # warp 1: every lane votes True
    outs = [np.zeros(64, np.int64) for _ in range(4)]
    device.launch(votes, 1, 64, values, *outs)
    device.synchronize()
    got_any, got_all, got_ballot, got_active = outs
    assert got_any.tolist() == [1] * 64
    assert got_all.tolist() == [0] * 32 + [1] * 32
    assert got_ballot.tolist() == [(1 << 3) | (1 << 17)] * 32 + [-1] * 32      # a signed 32-bit ballot
    assert got_active.tolist() == [0xFFFFFFFF] * 64


@pytest.mark.skipif(not device.SIMULATOR, reason="on a GPU a lane missing from a vote is undefined behaviour")
def test_a_lane_that_left_before_the_vote_is_named(capsys):
    wrong = dict(k.WRONG["15-b"])["RETURNS_BEFORE_THE_VOTE"]
    out = assert_verdict(capsys, ex15.check_warp_vote(wrong.kernel), "wrong")
    assert "lane 20 of warp 0" in out and "0xffffffff" in out, out


def test_right_answers_compile_for_the_gpu():
    """The solutions compile to PTX for sm_90, the warp votes included (Numba's own there)."""
    out, compiled = k.compile_solutions("15")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "raised" not in out.stdout and compiled == 7, out.stdout
