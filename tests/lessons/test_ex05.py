"""Lesson 05's checker: int64 / int32 / int32 is right; each wrong dtype is named."""

import pytest

from hisparse_numba import device
from hisparse_numba.lessons import ex05
from tests.lessons.verdicts import assert_verdict

xp = device.xp


def plan(src=xp.int64, dst=xp.int32, count=xp.int32):
    return lambda b, k: (xp.full((b, k), -1, dtype=src), xp.full((b, k), -1, dtype=dst), xp.zeros(b, dtype=count))


def reshapes_wrong(b, k):
    return xp.full(b * k, -1, dtype=xp.int64).reshape(b, k + 1), None, None


def stub(b, k):
    raise NotImplementedError("three arrays (about 3 lines)")


@pytest.mark.parametrize("fn,word,names", [
    (plan(), "right", ()),
    (plan(dst=xp.int64), "wrong", ("miss_dst is int64", "int32")),
    (plan(count=xp.int64), "wrong", ("miss_count is int64",)),
    (plan(src=xp.int32), "wrong", ("miss_src is int32", "2**31")),
    (plan(src=xp.int32, dst=xp.int32), "wrong", ("miss_src",)),
    (reshapes_wrong, "wrong", ("your code raised ValueError", "of your cell")),
    (stub, "not yet", ("about 3 lines",)),
])
def test_check_make_plan(capsys, fn, word, names):
    assert_verdict(capsys, ex05.check_make_plan(fn), word, *names)
