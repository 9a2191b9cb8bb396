"""Lesson 08's checker: plan rows for the whole padded batch are right; rows for the real requests,
one padding row too few or a missing counter are wrong, for several (batch, num_real) pairs."""

import pytest

from hisparse_numba.lessons import ex08
from tests.lessons.verdicts import assert_verdict


def stub(plan, batch, num_real):
    raise NotImplementedError("slice every array (about 1 line)")


@pytest.mark.parametrize("fn,word,names", [
    (lambda p, b, n: {k: v[:b] for k, v in p.items()}, "right", ()),
    (lambda p, b, n: {k: v[:n] for k, v in p.items()}, "wrong", ("stop at the real requests",)),
    (lambda p, b, n: {k: v[:n + 1] for k, v in p.items()}, "wrong",
     ("batch 4 with 2 real rows", "one padding row is not the padded batch")),
    (lambda p, b, n: {k: v[:b] for k, v in p.items() if k != "miss_count"}, "wrong", ("provided together",)),
    (lambda p, b, n: [v[:b] for v in p.values()], "wrong", ("returned a list",)),
    (stub, "not yet", ("about 1 line",)),
])
def test_check_plan_rows(capsys, fn, word, names):
    assert_verdict(capsys, ex08.check_plan_rows(fn), word, *names)
