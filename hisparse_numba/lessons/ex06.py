"""Lesson 06 (a partial miss plan): the stale-row finder, the exercise checker and the lesson's figure."""

from __future__ import annotations

import numpy as np

from .. import device
from .common import (PLAN_KEYS, checker, draw_grid, figure, launcher_says, learner_answer, report,
                     run_single_step, same, show, small_problem, wrong)


def stale_rows(layer, host_cache, plan, item_size_bytes):
    """Device rows of ``layer`` that do not hold the host item ``plan`` says was copied there.
    ``plan``: a dict with NumPy ``miss_src``, ``miss_dst``, ``miss_count``."""
    rows = device.to_host(layer).reshape(-1, item_size_bytes)
    host = np.asarray(device.to_host(host_cache)).reshape(-1, item_size_bytes)
    bad = []
    for b in range(plan["miss_count"].shape[0]):
        for m in range(int(plan["miss_count"][b])):
            s, d = int(plan["miss_src"][b, m]), int(plan["miss_dst"][b, m])
            if not np.array_equal(rows[d], host[s]):
                bad.append(d)
    return bad


@checker
def check_plan_kwargs(plan_kwargs) -> bool:
    """Exercise 06-a: ``plan_kwargs(batch, num_top_k)`` returns a dict to splat into the launcher
    (``**plan``) that records the same plan as the reference."""
    problem = small_problem(6)
    batch, k = problem["top_k_tokens"].shape
    answer = learner_answer(plan_kwargs, batch, k)
    if not isinstance(answer, dict):
        wrong(f"plan_kwargs returned a {type(answer).__name__}; a dict of keywords splats into the call")
    extra = set(answer) - set(PLAN_KEYS)
    if extra:
        wrong(f"the launcher has no keyword {sorted(extra)} (its plan keywords are {', '.join(PLAN_KEYS)})")
    missing = [name for name in PLAN_KEYS if answer.get(name) is None]
    if missing == list(PLAN_KEYS):
        wrong("the call records no plan: a replay would copy last step's items")
    if missing:
        wrong(f"{', '.join(missing)} missing: the plan is all three arrays or none "
              "(a launcher given part of it raises)")
    got, want = launcher_says(lambda: run_single_step(problem, *(answer[name] for name in PLAN_KEYS)))
    return report(same(got, want), "all three plan arrays are passed together and the plan "
                  "matches the reference", "the plan differs from the NumPy reference")


def draw_plan_pieces(pieces: dict) -> None:
    """Which of the three plan arrays a call passes (green) or leaves out (red), one row per call."""
    names = list(pieces)
    colors = np.array([[3 if pieces[n][k] else 2 for k in PLAN_KEYS] for n in names])
    fig, (ax,) = figure(6, 0.5 * len(names) + 1)
    draw_grid(ax, np.array([["passed" if pieces[n][k] else "missing" for k in PLAN_KEYS] for n in names]),
              colors=colors, row_labels=names, col_labels=list(PLAN_KEYS),
              title="a plan is three arrays: all or none")
    show(fig)
