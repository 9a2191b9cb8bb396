"""Lesson 01's checker: right for a plan of [padded batch, steps * top_k], wrong (naming the
mistake) for the plausible wrong plans, not yet for the stub, the learner's own error as theirs."""

import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.miss_plan import alloc_miss_plan
from hisparse_numba.lessons import ex01
from tests.lessons.verdicts import assert_verdict

xp = device.xp


def by_real_batch(padded, real, steps, top_k):
    return alloc_miss_plan(real, steps, top_k)


def one_step(padded, real, steps, top_k):
    return alloc_miss_plan(padded, 1, top_k)


def wrong_dtype(padded, real, steps, top_k):
    src, dst, cnt = alloc_miss_plan(padded, steps, top_k)
    return src, dst.astype(xp.int64), cnt


def two_arrays(padded, real, steps, top_k):
    return alloc_miss_plan(padded, steps, top_k)[:2]


def unpacks_wrong(padded, real, steps, top_k):
    src, dst = alloc_miss_plan(padded, steps, top_k)
    return src, dst


def stub(padded, real, steps, top_k):
    raise NotImplementedError("allocate [padded_batch, steps * top_k] (about 1 line)")


@pytest.mark.parametrize("fn,word,names", [
    (lambda p, r, s, k: alloc_miss_plan(p, s, k), "right", ()),
    (by_real_batch, "wrong", ("padding rows", "capacity 8192")),
    (one_step, "wrong", ("steps * top_k = 8192",)),
    (wrong_dtype, "wrong", ("must be int32",)),
    (two_arrays, "wrong", ("tuple of 2 items",)),
    (unpacks_wrong, "wrong", ("your code raised ValueError", "of your cell")),
    (stub, "not yet", ("about 1 line",)),
])
def test_check(capsys, fn, word, names):
    assert_verdict(capsys, ex01.check(fn), word, *names)


def test_the_right_answer_after_a_wrong_one_is_still_right(capsys):
    assert_verdict(capsys, ex01.check(by_real_batch), "wrong")
    assert_verdict(capsys, ex01.check(lambda p, r, s, k: alloc_miss_plan(p, s, k)), "right")
