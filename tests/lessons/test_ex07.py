"""Lesson 07's checker: row strides compared in elements are right; bytes, shapes and
contiguity are wrong."""

import pytest

from hisparse_numba.lessons import ex07
from tests.lessons.verdicts import assert_verdict


def stub(s, d):
    raise NotImplementedError("compare row strides in elements (about 1 line)")


@pytest.mark.parametrize("fn,word,names", [
    (lambda s, d: s.strides[0] // s.itemsize == d.strides[0] // d.itemsize, "right", ()),
    (lambda s, d: s.strides[0] == d.strides[0], "wrong", ("in bytes",)),
    (lambda s, d: s.shape == d.shape, "wrong", ("equal byte strides",)),
    (lambda s, d: s.flags.c_contiguous and d.flags.c_contiguous, "wrong", ("answer is",)),
    (lambda s, d: s.strides[0] // 8 == d.strides[0] // 8, "wrong", ("answer is",)),
    (lambda s, d: "yes", "wrong", ("True or False",)),
    (stub, "not yet", ("about 1 line",)),
])
def test_check_strides_match(capsys, fn, word, names):
    assert_verdict(capsys, ex07.check_strides_match(fn), word, *names)
