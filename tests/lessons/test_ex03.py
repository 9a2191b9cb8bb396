"""Lesson 03's checker: a [batch] view of the [batch, 1] counter is right; a copy, the 2-D counter,
one cell and a wrong dtype are wrong, each for its own reason."""

import pytest

from hisparse_numba import device
from hisparse_numba.lessons import ex03
from tests.lessons.verdicts import assert_verdict

xp = device.xp


def stub(counts2d):
    raise NotImplementedError("a view, not a copy (about 1 line)")


def typo(counts2d):
    return counts2d[:, 0, 1]


@pytest.mark.parametrize("fn,word,names", [
    (lambda c: c[:, 0], "right", ()),
    (lambda c: c.copy()[:, 0], "wrong", ("that was a copy",)),
    (lambda c: c, "wrong", ("still the [batch, 1] counter",)),
    (lambda c: c[0], "wrong", ("launcher rejects", "miss_count must have shape [batch]")),
    (lambda c: c[:, 0].astype(xp.int64), "wrong", ("miss_count must be int32",)),
    (typo, "wrong", ("your code raised IndexError",)),
    (stub, "not yet", ("about 1 line",)),
])
def test_check_count_view(capsys, fn, word, names):
    assert_verdict(capsys, ex03.check_count_view(fn), word, *names)
