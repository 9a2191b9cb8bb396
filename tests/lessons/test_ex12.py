"""Lesson 12's checker (the smallest verify_capacity; placeholders; answers that are not whole
numbers) and its verify-skipped warning."""

from __future__ import annotations

import numpy as np
import pytest

from hisparse_numba.kv_canary.examples import plan_problem
from hisparse_numba.lessons import ex12
from tests.lessons.verdicts import assert_verdict


@pytest.mark.parametrize("answer,word,names", [
    (13, "right", ()),
    (12, "wrong", ("overflows",)),
    (14, "wrong", ("not the smallest",)),
    (32, "wrong", ("padding row", "SWA row only its window")),
    (25, "wrong", ("not the smallest",)),
    (0, "wrong", (">= 1",)),
    (..., "not yet", ("replace ...",)),
    (None, "not yet", ("replace ...",)),
    (np.int64(13), "right", ()),
    (13.9, "wrong", ("answer is 13.9, a float", "whole number")),
    (13.0, "wrong", ("answer is 13.0, a float",)),
    (np.float64(13), "wrong", ("float64", "whole number")),
    (True, "wrong", ("answer is True, a bool",)),
    ("14", "wrong", ("answer is the string '14'", "without quotes")),
])
def test_ex12_capacity(capsys, answer, word, names):
    p = plan_problem([1, 0, 2, 3], [10, 7, 3, 12], [1, 0, 1, 1], max_reqs=4, max_seq_len=16,
                     swa_window_size=5, full_to_swa_index_mapping=np.arange(64, dtype=np.int64))
    assert_verdict(capsys, ex12.check_capacity(p, answer), word, *names)


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
