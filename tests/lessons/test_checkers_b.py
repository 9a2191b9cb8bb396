"""The exercise checkers of lessons 09-12 say right for right answers and wrong for wrong ones."""

from __future__ import annotations

import numpy as np
import pytest

from hisparse_numba.hisparse.examples import make_swap_in_problem
from hisparse_numba.kv_canary.examples import plan_problem
from hisparse_numba.lessons import ex09, ex10, ex11, ex12


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
        slots, lru = ex09.miss_slots_and_lru(p)
        assert ex09.check(p, slots, lru)
        assert len(set(slots)) == len(slots) and sorted(lru) == list(range(8))
    capsys.readouterr()


def test_ex10_pad(capsys):
    assert ex10.check_pad(lambda n: (n + 15) // 16 * 16)
    _said(capsys, "right")
    assert not ex10.check_pad(lambda n: n + (n % 16))
    _said(capsys, "wrong")
    assert not ex10.check_pad(lambda n: 1 / 0)
    _said(capsys, "wrong")


def test_ex10_aligned_offsets(capsys):
    assert ex10.check_aligned_offsets([0, 2, 4, 6], 584)
    _said(capsys, "right")
    assert not ex10.check_aligned_offsets([0, 1, 2, 3, 4, 5, 6, 7], 584)
    _said(capsys, "wrong")
    assert ex10.check_aligned_offsets(list(range(8)), 592)
    _said(capsys, "right")


def test_ex11_bytes(capsys):
    kw = dict(pool_items=100_000, item_size_bytes=1152, misses=256)
    assert ex11.check_bytes(2 * 100_000 * 1152, 256 * 1152, **kw)
    _said(capsys, "right")
    assert not ex11.check_bytes(100_000 * 1152, 256 * 1152, **kw)      # one direction only
    _said(capsys, "wrong")
    assert not ex11.check_bytes(2 * 100_000 * 1152, 2 * 100_000 * 1152, **kw)
    _said(capsys, "wrong")


def test_ex11_warning_text_matches_the_catalogue():
    from hisparse_numba import errors

    assert errors.explain(ex11.HOST_COPY_WARNING)[0].lesson == "11"


@pytest.mark.parametrize("answer,right", [(13, True), (12, False), (14, False), (35, False), (0, False)])
def test_ex12_capacity(capsys, answer, right):
    p = plan_problem([1, 0, 2, 3], [10, 7, 3, 12], [1, 0, 1, 1], max_reqs=4, max_seq_len=16,
                     swa_window_size=5, full_to_swa_index_mapping=np.arange(64, dtype=np.int64))
    assert ex12.check_capacity(p, answer) is right
    _said(capsys, "right" if right else "wrong")


def test_ex12_warns_only_when_skipped():
    from hisparse_numba.kv_canary.examples import allocate_plans, run_plan

    p = plan_problem([1, 2], [4, 3], [1, 1], max_reqs=3, max_seq_len=16)
    for cap, skipped in ((6, True), (7, False)):
        vp, wp = allocate_plans(cap, 2, host=True)
        run_plan(p, cap, 2, kernel=False, plans=(vp, wp))
        if skipped:
            with pytest.warns(ex12.VerifySkippedWarning):
                assert ex12.warn_if_verify_skipped(vp, cap)
        else:
            assert not ex12.warn_if_verify_skipped(vp, cap)
