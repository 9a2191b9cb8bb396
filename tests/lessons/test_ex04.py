"""Lesson 04's checker names the right tool for each step count."""

import pytest

from hisparse_numba.lessons import ex04
from tests.lessons.verdicts import assert_verdict


def right(n):
    return "single-step" if n == 1 else ("speculative" if n <= 4 else "fewer drafts")


def stub(n):
    raise NotImplementedError("three cases (about 5 lines)")


@pytest.mark.parametrize("fn,word,names", [
    (right, "right", ()),
    (lambda n: "speculative" if n <= 4 else "fewer drafts", "wrong", ("choose(1)", "single-step LRU kernel")),
    (lambda n: "single-step" if n == 1 else "speculative", "wrong", ("choose(5)", "sized for 4")),
    (lambda n: "single-step" if n == 1 else ("speculative" if n < 4 else "fewer drafts"), "wrong",
     ("choose(4)",)),
    (lambda n: "spec", "wrong", ("the answers are",)),
    (stub, "not yet", ("about 5 lines",)),
])
def test_check_choose(capsys, fn, word, names):
    assert_verdict(capsys, ex04.check_choose(fn), word, *names)
