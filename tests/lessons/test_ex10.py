"""Lesson 10's checkers: padding to 16 bytes, and which 584-byte items start aligned."""

from hisparse_numba.lessons import ex10
from tests.lessons.verdicts import assert_verdict
import pytest


def stub(n):
    raise NotImplementedError("round up to a multiple of 16 (about 1 line)")


@pytest.mark.parametrize("fn,word,names", [
    (lambda n: (n + 15) // 16 * 16, "right", ()),
    (lambda n: n + (n % 16), "wrong", ("not a multiple of 16",)),
    (lambda n: (n // 16 + 1) * 16, "wrong", ("needs no padding",)),
    (lambda n: n // 16 * 16, "wrong", ("rounded down",)),
    (lambda n: (n + 15) / 16 * 16, "wrong", ("use //",)),
    (lambda n: 1 / 0, "wrong", ("your code raised ZeroDivisionError",)),
    (stub, "not yet", ("about 1 line",)),
])
def test_check_pad(capsys, fn, word, names):
    assert_verdict(capsys, ex10.check_pad(fn), word, *names)


@pytest.mark.parametrize("items,size,word,names", [
    ([0, 2, 4, 6], 584, "right", ()),
    (list(range(8)), 584, "wrong", ("item 1 starts at byte", "% 16 = 8")),
    ([0, 4], 584, "wrong", ("item 2 starts at byte 1168",)),
    ([0], 584, "wrong", ("aligned too",)),
    (list(range(8)), 592, "right", ()),
    (3, 584, "wrong", ("list of item numbers",)),
])
def test_check_aligned_offsets(capsys, items, size, word, names):
    assert_verdict(capsys, ex10.check_aligned_offsets(items, size), word, *names)


def test_check_aligned_offsets_placeholder(capsys):
    assert_verdict(capsys, ex10.check_aligned_offsets(..., 584), "not yet", "replace ...")
