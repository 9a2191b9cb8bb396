"""Lesson 09: the checker (the misses' slots and the new LRU order, each wrong part named, the
placeholders and non-numbers) and ``overfull_step``, the damage of a step with more misses than
hot slots, built from explicit leftovers and equal to what the kernel does with them."""

from __future__ import annotations

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.single_step.examples import make_swap_in_problem, to_device_problem, to_host_problem
from hisparse_numba.lessons import common, ex09


def _said(capsys, word):
    out = capsys.readouterr().out
    assert out.startswith(word), out
    return out


def lesson09_problem():
    H = K = 6
    return dict(
        top_k_tokens=np.array([[10, 11, 12, 13, 14, 15]], np.int32),
        device_buffer_tokens=np.array([[0, 1, 12, 3, 14, 5, -1]], np.int32),
        host_cache_locs=np.arange(20, dtype=np.int64)[None],
        device_buffer_locs=np.array([[3, 0, 6, 2, 5, 1, 4]], np.int32),
        host_cache=np.zeros((20, 4)), device_buffer=np.zeros((H + 1, 4)),
        top_k_device_locs=np.zeros((1, K), np.int32),
        req_pool_indices=np.array([0], np.int32), seq_lens=np.array([20], np.int32),
        lru_slots=np.arange(H, dtype=np.int16)[None], item_size_bytes=32, num_top_k=K,
        hot_buffer_size=H, block_size=32, num_real_reqs=np.array([1], np.int32),
        miss_src=None, miss_dst=None, miss_count=None,
    )


def test_ex09_right_and_wrong(capsys):
    p = lesson09_problem()
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in p.items()}
    assert ex09.check(p, [0, 1, 3, 5], [0, 1, 3, 5, 2, 4])
    _said(capsys, "right")
    assert not ex09.check(p, [0, 1, 2, 3], [0, 1, 3, 5, 2, 4])
    _said(capsys, "wrong")
    assert not ex09.check(p, [0, 1, 3, 5], [2, 4, 0, 1, 3, 5])
    assert "lru_slots" in _said(capsys, "wrong")
    for k, v in before.items():            # the checker works on a copy
        if isinstance(v, np.ndarray):
            assert np.array_equal(p[k], v), k


def test_ex09_agrees_with_the_reference_on_random_problems(capsys):
    rng = np.random.default_rng(3)
    for _ in range(5):
        p = make_swap_in_problem(rng, batch=1, num_top_k=4, hot_buffer_size=8, fast_rows=0,
                                 record_plan=False)
        slots, lru = common.miss_slots_and_lru(p)
        assert ex09.check(p, slots, lru)
        assert len(set(slots)) == len(slots) and sorted(lru) == list(range(8))
    capsys.readouterr()


def test_ex09_more_wrong_predictions(capsys):
    p = lesson09_problem()
    for slots, lru in (([0, 1, 2, 3], [0, 1, 2, 3, 4, 5]),        # the first four LRU slots, hits ignored
                       ([2, 4, 0, 1], [0, 1, 3, 5, 2, 4]),        # the slots of the hits
                       ([0, 1, 3, 5], [0, 1, 2, 3, 4, 5])):       # LRU order unchanged
        assert not ex09.check(p, slots, lru)
        out = _said(capsys, "wrong")
        assert ("slots" in out) and ("hint" in out)


@pytest.mark.parametrize("slots,lru", [(..., ...), (None, None), ([0, 1, 3, 5], None), (None, ...)])
def test_ex09_placeholders_are_not_yet(capsys, slots, lru):
    assert not ex09.check(lesson09_problem(), slots, lru)
    _said(capsys, "not yet")


@pytest.mark.parametrize("slots,names", [
    ("0 1 3 5", ("miss_slots must be a list of slot numbers",)),
    ([0, 1, 3.0, 5], ("miss_slots[2] is 3.0", "whole number")),
    ([0, 1, np.float64(3), 5], ("miss_slots[2]", "float64")),
    ([0, True, 3, 5], ("miss_slots[1] is True, a bool",)),
    ([0, "1", 3, 5], ("miss_slots[1] is the string '1'",)),
])
def test_ex09_non_numbers_are_named(capsys, slots, names):
    assert not ex09.check(lesson09_problem(), slots, [0, 1, 3, 5, 2, 4])
    out = _said(capsys, "wrong")
    for name in names:
        assert name in out, out


def test_ex09_an_integer_array_is_an_answer(capsys):
    assert ex09.check(lesson09_problem(), np.array([0, 1, 3, 5]), np.array([0, 1, 3, 5, 2, 4], np.int16))
    _said(capsys, "right")


# ----------------------------------------------------------------- the overfull step

SEQ_LEN, D = 20, 4


def overfull_problem(hot_buffer_size=4, selected=(10, 11, 12, 13, 14, 15)):
    """Lesson 09's setting: one request, slots 0..3 hold positions 0..3, every selection a miss."""
    H, K = hot_buffer_size, len(selected)
    tags = np.full((1, H + 1), -1, np.int32)
    tags[0, :4] = [0, 1, 2, 3]
    return dict(
        top_k_tokens=np.array([selected], np.int32), device_buffer_tokens=tags,
        host_cache_locs=np.arange(SEQ_LEN, dtype=np.int64)[None],
        device_buffer_locs=np.random.default_rng(1).permutation(H + 1).astype(np.int32)[None],
        host_cache=np.repeat(np.arange(SEQ_LEN, dtype=np.float64), D).reshape(SEQ_LEN, D),
        device_buffer=np.full((H + 1, D), -1.0), top_k_device_locs=np.full((1, K), -9, np.int32),
        req_pool_indices=np.array([0], np.int32), seq_lens=np.array([SEQ_LEN], np.int32),
        lru_slots=np.arange(H, dtype=np.int16)[None], item_size_bytes=D * 8, num_top_k=K,
        hot_buffer_size=H, block_size=32, num_real_reqs=np.array([1], np.int32),
        miss_src=np.full((1, K), -1, np.int64), miss_dst=np.full((1, K), -1, np.int32),
        miss_count=np.zeros(1, np.int32))


def test_overfull_step_hands_one_row_to_three_lanes():
    p = overfull_problem()
    before = {k: v.copy() for k, v in p.items() if isinstance(v, np.ndarray)}
    bad = ex09.overfull_step(p, leftover_slots=[0, 0])
    locs = p["device_buffer_locs"][0]
    rows = bad["top_k_device_locs"][0]
    assert rows.tolist() == locs[[0, 1, 2, 3, 0, 0]].tolist()
    assert bad["miss_count"].tolist() == [6] and bad["miss_dst"][0].tolist() == rows.tolist()
    assert bad["miss_src"][0].tolist() == list(range(10, 16))
    assert bad["device_buffer_tokens"][0, :4].tolist() == [15, 11, 12, 13]     # the last lane's tag
    assert bad["device_buffer"][locs[0]].tolist() == [15.0] * D                   # the last lane's copy
    wrong_kv = [lane for lane, (t, r) in enumerate(zip(range(10, 16), rows)) if bad["device_buffer"][r, 0] != t]
    assert wrong_kv == [0, 4]
    for k, v in before.items():                                                   # a copy, not in place
        assert np.array_equal(p[k], v), k


def test_overfull_step_is_the_same_every_time_and_follows_its_leftovers():
    first = ex09.overfull_step(overfull_problem(), [0, 0])
    again = ex09.overfull_step(overfull_problem(), [0, 0])
    for k, v in first.items():
        if isinstance(v, np.ndarray):
            assert np.array_equal(v, again[k]), k
    other = ex09.overfull_step(overfull_problem(), [2, 3])
    locs = overfull_problem()["device_buffer_locs"][0]
    assert other["top_k_device_locs"][0, 4:].tolist() == locs[[2, 3]].tolist()


@pytest.mark.parametrize("leftover,match", [([0], "2 slot numbers"), ([0, 4], r"in \[0, 4\)"),
                                            ([0, -1], r"in \[0, 4\)")])
def test_overfull_step_rejects_bad_leftovers(leftover, match):
    with pytest.raises(ValueError, match=match):
        ex09.overfull_step(overfull_problem(), leftover)


def test_overfull_step_takes_only_all_miss_steps():
    with pytest.raises(ValueError, match="all misses"):
        ex09.overfull_step(overfull_problem(selected=(1, 11, 12, 13, 14, 15)), [0, 0])


class _ZeroedNumpy:
    """numpy, except that ``empty`` gives zeros: the simulator's shared arrays start zeroed."""

    def __getattr__(self, name):
        return np.zeros if name == "empty" else getattr(np, name)


@pytest.mark.skipif(not device.SIMULATOR, reason="only the simulator's shared memory can be zeroed first")
def test_overfull_step_is_what_the_kernel_does_with_zeroed_shared_memory(monkeypatch):
    from numba.cuda.simulator import kernelapi

    from hisparse_numba.hisparse.single_step import SwapInCall, launch_unchecked

    monkeypatch.setattr(kernelapi, "np", _ZeroedNumpy())
    want = ex09.overfull_step(overfull_problem(), [0, 0])
    d = to_device_problem(overfull_problem())
    arrays = {name: d[name] for name in SwapInCall._fields[8:] if name in d}
    launch_unchecked(SwapInCall(batch=1, num_real=1, num_top_k=6, hot_buffer_size=4, block_size=32,
                                record_plan=True, skip_io=False, item_size_bytes=D * 8, **arrays))
    device.synchronize()
    got = to_host_problem(d)
    for k in ("top_k_device_locs", "miss_src", "miss_dst", "miss_count"):
        assert np.array_equal(got[k], want[k]), k
    shared_row = int(want["top_k_device_locs"][0, 0])
    others = [r for r in range(5) if r != shared_row]
    assert np.array_equal(got["device_buffer"][others], want["device_buffer"][others])
    # the racing copies: the shared row holds one of the three tokens' bytes in each word
    assert set(got["device_buffer"][shared_row].tolist()) <= {10.0, 14.0, 15.0}
    assert got["device_buffer_tokens"][0, 0] in (10, 14, 15)
    assert np.array_equal(got["device_buffer_tokens"][0, 1:], want["device_buffer_tokens"][0, 1:])
