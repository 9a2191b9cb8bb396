"""Lesson 06's checker: all three plan keywords are right; a missing, misspelt or absent plan is
wrong, each for its own reason."""

import pytest

from hisparse_numba import device
from hisparse_numba.lessons import ex06
from hisparse_numba.lessons.common import PLAN_KEYS
from tests.lessons.verdicts import assert_verdict

xp = device.xp


def plan(b, k):
    return dict(zip(PLAN_KEYS, (xp.full((b, k), -1, dtype=xp.int64), xp.full((b, k), -1, dtype=xp.int32),
                                xp.zeros(b, dtype=xp.int32))))


def without(key):
    return lambda b, k: {n: a for n, a in plan(b, k).items() if n != key}


def stub(b, k):
    raise NotImplementedError("a dict of three arrays (about 3 lines)")


@pytest.mark.parametrize("fn,word,names", [
    (plan, "right", ()),
    (without("miss_count"), "wrong", ("miss_count missing", "all three")),
    (without("miss_src"), "wrong", ("miss_src missing",)),
    (lambda b, k: dict(zip(("miss_src", "miss_dst", "miss_cnt"), plan(b, k).values())), "wrong",
     ("no keyword ['miss_cnt']",)),
    (lambda b, k: {}, "wrong", ("records no plan",)),
    (lambda b, k: tuple(plan(b, k).values()), "wrong", ("returned a tuple",)),
    (stub, "not yet", ("about 3 lines",)),
])
def test_check_plan_kwargs(capsys, fn, word, names):
    assert_verdict(capsys, ex06.check_plan_kwargs(fn), word, *names)
