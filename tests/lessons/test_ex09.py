"""Lesson 09's checker (also lesson 00's until it has its own): the misses' slots and the new LRU
order, each wrong part named."""

from __future__ import annotations

import numpy as np

from hisparse_numba.hisparse.single_step.examples import make_swap_in_problem
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


def test_ex09_placeholders_and_junk(capsys):
    p = lesson09_problem()
    assert not ex09.check(p, ..., ...)
    _said(capsys, "not yet")
    assert not ex09.check(p, "0 1 3 5", [0, 1, 3, 5, 2, 4])
    assert "lists of slot numbers" in _said(capsys, "wrong")
