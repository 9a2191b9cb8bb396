"""Lesson 14's puzzle checkers: the solutions are right on every case, every plausible wrong answer
(``wrong_answers/l14_*``) is wrong with the words that name it, stubs are ``not yet``, every puzzle
draws a picture, and the hints come in three levels."""

import matplotlib
import numpy as np
import pytest

from hisparse_numba import compile_check, device
from hisparse_numba.device import cuda
from hisparse_numba.hisparse.single_step.hash import hash_find_dev, hash_insert_dev
from hisparse_numba.lessons import ex14
from hisparse_numba.lessons.puzzles import harness

from . import puzzle_kernels as k
from .puzzle_kernels import close_figures  # noqa: F401 - an autouse fixture
from .verdicts import assert_verdict

matplotlib.use("Agg")
COMPILE_TOOLCHAIN_MISSING = compile_check.compile_toolchain_missing()

CHECKS = {"a": ex14.check_gather_guard, "b": ex14.check_chunk_loop, "c": ex14.check_hit_test,
          "d": ex14.check_chain_step, "e": ex14.check_hash_probe, "f": ex14.check_clock_victim}
SHOWS = {"a": ex14.show_gather_guard, "b": ex14.show_chunk_loop, "c": ex14.show_hit_test,
         "d": ex14.show_chain_step, "e": ex14.show_hash_probe, "f": ex14.show_clock_victim}
SOLVED_NAMES = {"a": "gather_words", "b": "copy_item_dev", "c": "hit_rows", "d": "mix3_dev",
                "e": "hash_find_dev", "f": "pick_victims"}
WRONG = [(key, name, w) for key, entries in sorted(k.WRONG.items()) if key.startswith("14-")
         for name, w in entries]


def test_the_ramp_has_six_puzzles_each_with_several_cases():
    assert sorted(ex14.PUZZLES) == list("abcdef")
    for letter, puzzle in ex14.PUZZLES.items():
        names = [c.name for c in puzzle.cases()]
        assert len(names) >= 3 and len(set(names)) == len(names), (letter, names)


def test_every_solution_is_right():
    _, printed = k.solved("14")
    assert sorted(printed) == [f"14-{x}" for x in "abcdef"]
    for exercise, out in printed.items():
        assert out.startswith("right: all "), (exercise, out)


@pytest.mark.parametrize("key,name,answer", WRONG, ids=[f"{key}-{name}" for key, name, _ in WRONG])
def test_wrong_answer_is_rejected_by_name(capsys, monkeypatch, key, name, answer):
    if answer.simulator_only and not device.SIMULATOR:
        pytest.skip("only the simulator's trace sees this mistake")
    if "still running" in answer.says:           # a loop that never ends: stopped sooner than in a lesson
        monkeypatch.setattr(harness, "RUNAWAY_SECONDS", 5.0)
    check = CHECKS[key[-1]]
    for _ in range(answer.runs):
        assert_verdict(capsys, check(answer.kernel), "wrong", *answer.words(device.SIMULATOR))


def test_every_puzzle_has_wrong_answers():
    assert {key for key, _, _ in WRONG} == {f"14-{x}" for x in "abcdef"}


@pytest.mark.parametrize("letter", list("abcdef"))
def test_stub_is_not_yet(capsys, letter):
    stub = k.kernel_stub if ex14.PUZZLES[letter].wrap is None else k.device_stub
    assert_verdict(capsys, CHECKS[letter](stub), "not yet")


@pytest.mark.parametrize("letter", list("abcdef"))
def test_every_puzzle_draws_right_answers_and_stubs(capsys, letter):
    namespace, _ = k.solved("14")
    SHOWS[letter](namespace[SOLVED_NAMES[letter]])
    title = k.last_title()
    assert "(right)" in title if device.SIMULATOR else "the reference writes" in title
    stub = k.kernel_stub if ex14.PUZZLES[letter].wrap is None else k.device_stub
    SHOWS[letter](stub)
    assert "the reference writes" in k.last_title()


def test_a_wrong_case_is_drawn_with_its_name(capsys):
    ex14.show_gather_guard(k.WRONG["14-a"][0][1].kernel, "one word short of whole blocks")
    if device.SIMULATOR:
        assert "one word short of whole blocks" in k.last_title() and "wrong" in k.last_title()
    ex14.show_gather_guard(k.WRONG["14-a"][0][1].kernel, "no such case")
    assert "no case named 'no such case'; the cases are" in capsys.readouterr().out


def test_hints_come_in_three_levels_then_the_solution(capsys):
    texts = []
    for level in (1, 2, 3):
        ex14.hint("d", level)
        texts.append(capsys.readouterr().out)
    assert len(set(texts)) == 3 and all(t.startswith(f"hint 14-d, level {i}") for i, t in enumerate(texts, 1))
    assert "lessons/solutions/14.py" in texts[2]
    ex14.hint("d", 4)
    assert "lessons/solutions/14.py" in capsys.readouterr().out
    ex14.hint("z")
    assert "the puzzles are a, b, c, d, e, f" in capsys.readouterr().out


def test_outputs_start_poisoned():
    for puzzle in ex14.PUZZLES.values():
        for case in puzzle.cases():
            for name in case.want:
                assert k.all_poison(case.args[name]) or name == "count", (puzzle.key, case.name, name)


def test_hit_reference_agrees_with_the_swap_in_reference():
    """Where the hit test gives a row (a hit or the newest token), the swap-in reference gives it too;
    where it gives -1, the swap-in sends the lane to a freshly filled slot (a miss)."""
    from hisparse_numba.hisparse.single_step.examples import make_swap_in_problem
    from hisparse_numba.hisparse.single_step import load_cache_to_device_buffer_mla_reference

    p = make_swap_in_problem(np.random.default_rng(3), batch=3, num_top_k=8, hot_buffer_size=16,
                             fast_rows=0, record_plan=False)
    tags, locs = p["device_buffer_tokens"].copy(), p["device_buffer_locs"].copy()
    rid = p["req_pool_indices"].astype(np.int64)
    H = p["hot_buffer_size"]
    mine = ex14.hit_rows_reference(tags[rid], locs[rid], p["top_k_tokens"], p["seq_lens"], 3, H)
    load_cache_to_device_buffer_mla_reference(**p)
    theirs = p["top_k_device_locs"][:, :8]
    assert np.array_equal(theirs[mine >= 0], mine[mine >= 0])
    assert (mine == -1).any()
    for b in range(3):                       # a miss lands in a row no hit of its request reads
        assert not np.isin(theirs[b][mine[b] == -1], mine[b][mine[b] >= 0]).any()


@cuda.jit
def insert_then_find(keys, size, table, lanes):
    t = cuda.threadIdx.x
    if t == 0:
        for lane in range(keys.shape[0]):
            hash_insert_dev(table, size, keys[lane], lane)
    cuda.syncthreads()
    if t < keys.shape[0]:
        lanes[t] = hash_find_dev(table, size, keys[t] + 1000 * (t % 2))


def test_hash_references_agree_with_the_swap_in_hash():
    """The probe's reference finds what the swap-in's own device functions insert and find."""
    keys = np.array([1, 9, 17, 3, 11, 19, 40], np.int64)
    table, lanes = np.full(14, -1, np.int64), np.zeros(7, np.int64)
    device_table, device_lanes = device.to_device(table), device.to_device(lanes)
    device.launch(insert_then_find, 1, 8, device.to_device(keys), 14, device_table, device_lanes)
    device.synchronize()
    assert np.array_equal(device.to_host(device_table), ex14.hash_table_reference(keys, 14))
    want = [ex14.hash_find_reference(ex14.hash_table_reference(keys, 14), key + 1000 * (t % 2))
            for t, key in enumerate(keys)]
    assert device.to_host(device_lanes).tolist() == want


@pytest.mark.skipif(COMPILE_TOOLCHAIN_MISSING is not None, reason=COMPILE_TOOLCHAIN_MISSING or "")
def test_right_answers_compile_for_the_gpu():
    """The solutions (and the checkers' kernels around them) compile to PTX for sm_90."""
    out, compiled = k.compile_solutions("14")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "raised" not in out.stdout and compiled == 6, out.stdout


def test_poison_marks_unwritten_elements():
    assert harness.poison(3, np.uint32).view(np.int32).tolist() == [harness.POISON] * 3
    assert harness.show_value(np.int32(harness.POISON)).startswith("POISON")
