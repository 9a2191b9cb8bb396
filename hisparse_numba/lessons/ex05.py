"""Lesson 05 (miss-plan dtypes): the exercise checker and the lesson's figure."""

from __future__ import annotations

import numpy as np

from .common import (checker, draw_grid, figure, launcher_says, learner_answer, report, run_single_step, same, show,
                     small_problem, three_arrays, wrong)

WANT_DTYPES = {"miss_src": "int64", "miss_dst": "int32", "miss_count": "int32"}


@checker
def check_make_plan(make_plan) -> bool:
    """Exercise 05-a: ``make_plan(batch, num_top_k)`` returns ``(miss_src, miss_dst, miss_count)``
    device arrays that the launcher accepts and that record the same plan as the reference."""
    problem = small_problem(5)
    batch, k = problem["top_k_tokens"].shape
    plan = three_arrays(learner_answer(make_plan, batch, k), "make_plan")
    for key, a in zip(("miss_src", "miss_dst", "miss_count"), plan):
        if str(a.dtype) != WANT_DTYPES[key]:
            hint = " (a host row index can pass 2**31 in a large pool)" if key == "miss_src" else ""
            wrong(f"{key} is {a.dtype}; the kernel writes it as {WANT_DTYPES[key]}{hint}")
    got, want = launcher_says(lambda: run_single_step(problem, *plan))
    return report(same(got, want), "int64 sources, int32 destinations and int32 counts; the plan "
                  "matches the reference", "the plan differs from the NumPy reference")


def draw_words(int32_values, title: str) -> None:
    """int32 values written one after another, and the int64 words the same bytes make: each
    int64 word is two int32 writes side by side (low half first)."""
    v32 = np.asarray(int32_values, dtype=np.int32)
    v64 = v32.view(np.int64) if v32.size % 2 == 0 else np.append(v32, -1).view(np.int64)
    fig, (top, bottom) = figure(8, 2.2, nrows=2)
    draw_grid(top, v32.reshape(1, -1), colors=np.tile([1, 3], v32.size // 2 + 1)[:v32.size].reshape(1, -1),
              row_labels=["int32 writes"], title=title)
    wide = np.repeat(v64, 2).reshape(1, -1)[:, :v32.size]
    draw_grid(bottom, wide, colors=np.full(wide.shape, 2), annotate=False, row_labels=["read as int64"])
    for i, w in enumerate(v64.tolist()):
        bottom.text(2 * i + 0.5, 0, f"{w}", ha="center", va="center", fontsize=7)
    show(fig)
