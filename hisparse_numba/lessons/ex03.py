"""Lesson 03 (speculative miss_count shape): the exercise checker and the lesson's figure."""

from __future__ import annotations

import numpy as np

from .. import device
from ..hisparse.miss_plan import alloc_miss_plan
from ..hisparse.speculative.examples import mismatches
from .common import checker, launcher_says, learner_answer, report, run_speculative, spec_problem, wrong


@checker
def check_count_view(make_count) -> bool:
    """Exercise 03-a: ``make_count(counts2d)`` turns an old ``[batch, 1]`` int32 counter into the
    ``miss_count`` argument, without a copy (the old code keeps reading ``counts2d``)."""
    kw = spec_problem(3, batch=3)
    batch, steps, top_k = kw["top_k_tokens"].shape
    counts2d = device.xp.full((batch, 1), -5, dtype=device.xp.int32)
    kw["miss_src"], kw["miss_dst"], _ = alloc_miss_plan(batch, steps, top_k)
    count = learner_answer(make_count, counts2d)
    if not hasattr(count, "shape"):
        wrong(f"make_count returned a {type(count).__name__}, not an array")
    if tuple(count.shape) == (batch, 1):
        wrong("that is still the [batch, 1] counter: the launcher wants one number per row, shape [batch]")
    kw["miss_count"] = count
    got, want = launcher_says(lambda: run_speculative(kw))
    if mismatches(got, want):
        wrong(f"kernel and reference differ in {mismatches(got, want)}")
    seen = device.to_host(counts2d)[:, 0]
    return report(np.array_equal(seen, want["miss_count"]),
                  f"a [batch] view of the [batch, 1] counter; the old code sees counts {seen.tolist()}",
                  f"the counts did not reach counts2d (it holds {seen.tolist()}): that was a copy")
