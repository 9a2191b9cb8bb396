"""The exercise checkers of lessons 03-08: right for a right answer, wrong for a wrong one."""

import pytest

from hisparse_numba import device
from hisparse_numba.lessons import ex03, ex04, ex05, ex06, ex07, ex08

xp = device.xp


def _verdict(capsys, ok, expected):
    out = capsys.readouterr().out
    assert ok is expected
    assert out.startswith("right" if expected else "wrong"), out


def _plan(batch, k, dst=xp.int32, count=xp.int32):
    return (xp.full((batch, k), -1, dtype=xp.int64), xp.full((batch, k), -1, dtype=dst),
            xp.zeros(batch, dtype=count))


@pytest.mark.parametrize("dst,count,expected", [(xp.int32, xp.int32, True), (xp.int64, xp.int32, False),
                                                (xp.int32, xp.int64, False)])
def test_ex05(capsys, dst, count, expected):
    _verdict(capsys, ex05.check_make_plan(lambda b, k: _plan(b, k, dst, count)), expected)


@pytest.mark.parametrize("drop,expected", [(None, True), ("miss_count", False), ("miss_src", False)])
def test_ex06(capsys, drop, expected):
    def plan_kwargs(b, k):
        d = dict(zip(ex05.PLAN_KEYS, _plan(b, k)))
        d.pop(drop, None)
        return d
    _verdict(capsys, ex06.check_plan_kwargs(plan_kwargs), expected)


def test_ex06_typo(capsys):
    _verdict(capsys, ex06.check_plan_kwargs(lambda b, k: dict(zip(("miss_src", "miss_dst", "miss_cnt"),
                                                                 _plan(b, k)))), False)


@pytest.mark.parametrize("fn,expected", [
    (lambda s, d: s.strides[0] // s.itemsize == d.strides[0] // d.itemsize, True),
    (lambda s, d: s.strides[0] == d.strides[0], False),
])
def test_ex07(capsys, fn, expected):
    _verdict(capsys, ex07.check_strides_match(fn), expected)


@pytest.mark.parametrize("fn,expected", [(lambda c: c[:, 0], True), (lambda c: c[:, 0].copy(), False),
                                         (lambda c: c, False)])
def test_ex03(capsys, fn, expected):
    _verdict(capsys, ex03.check_count_view(fn), expected)


@pytest.mark.parametrize("fn,expected", [
    (lambda n: "single-step" if n == 1 else ("speculative" if n <= 4 else "fewer drafts"), True),
    (lambda n: "speculative" if n <= 4 else "fewer drafts", False),
])
def test_ex04(capsys, fn, expected):
    _verdict(capsys, ex04.check_choose(fn), expected)


@pytest.mark.parametrize("rows,expected", [("batch", True), ("real", False)])
def test_ex08(capsys, rows, expected):
    def plan_rows(plan, batch, num_real):
        n = batch if rows == "batch" else num_real
        return {k: v[:n] for k, v in plan.items()}
    _verdict(capsys, ex08.check_plan_rows(plan_rows), expected)
