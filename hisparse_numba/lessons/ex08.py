"""Lesson 08 (padded batches and reused plan rows): the exercise checker."""

from __future__ import annotations

from ..hisparse.miss_plan import alloc_miss_plan
from ..hisparse.spec_examples import mismatches
from .ex03 import run_both, spec_problem
from .ex05 import PLAN_KEYS, _report


def check_plan_rows(plan_rows) -> bool:
    """Exercise 08: ``plan_rows(plan, batch, num_real)`` returns the dict of plan arrays to pass for
    a speculative call whose selection has ``batch`` rows, of which ``num_real`` are real; ``plan``
    holds buffers allocated once for the largest batch."""
    batch, num_real, steps, top_k = 3, 2, 2, 8
    kw = spec_problem(8, batch=batch, num_real=num_real, steps=steps, top_k=top_k)
    plan = dict(zip(PLAN_KEYS, alloc_miss_plan(6, steps, top_k)))
    try:
        kw.update(plan_rows(plan, batch, num_real))
        got, want = run_both(kw)
    except ValueError as e:
        return _report(False, "", f"the launcher rejects it: {e}")
    except Exception as e:
        return _report(False, "", f"{type(e).__name__}: {e}")
    if mismatches(got, want):
        return _report(False, "", f"kernel and reference differ in {mismatches(got, want)}")
    return _report(int(got["miss_count"][batch - 1]) == 0,
                   "rows for the padded batch; the padding row's count is 0",
                   "the padding row's count was not written")
