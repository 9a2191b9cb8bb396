"""Lesson 01 (speculative miss-plan capacity): the exercise checker and the lesson's figure.

The exercise: a server warmed up at batch 2 and allocated its plan then. Later the CUDA graph is
captured for a padded batch (``padded_batch`` rows, of which ``real_batch`` are real requests).
The learner writes ``plan_for(padded_batch, real_batch, num_steps, num_top_k)`` returning
``(miss_src, miss_dst, miss_count)`` that the speculative launcher accepts for that batch.
"""

from __future__ import annotations

import numpy as np

from .. import device
from ..checks import check_miss_plan
from ..hisparse.miss_plan import miss_plan_capacity
from ..hisparse.speculative import COUNT_MESSAGE, plan_shape_message
from .common import checker, draw_grid, figure, launcher_says, learner_answer, report, show, three_arrays, wrong

CASES = [(8, 5, 4, 2048), (16, 16, 3, 1024), (4, 1, 2, 64), (64, 33, 4, 2048)]


def _mistake(src, padded, real, steps, top_k) -> str:
    rows, cols = (tuple(src.shape) + (0, 0))[:2]
    if src.ndim == 2 and rows == real != padded:
        return f" (your plan has {rows} rows, one per real request: padding rows are launched and written too)"
    if src.ndim == 2 and cols == top_k:
        return (f" (your rows have {cols} columns, one per top-k entry: a speculative row can hold "
                f"steps * top_k = {steps * top_k} unique misses)")
    return ""


@checker
def check(plan_for) -> bool:
    """Print ``right``/``wrong``/``not yet`` for the learner's ``plan_for``; return whether right."""
    for padded, real, steps, top_k in CASES:
        src, dst, cnt = three_arrays(learner_answer(plan_for, padded, real, steps, top_k), "plan_for")
        cap = miss_plan_capacity(steps, top_k)
        where = f"for padded batch {padded} (real {real}), steps {steps}, top_k {top_k}"
        launcher_says(lambda: check_miss_plan(src, dst, cnt, batch=padded, capacity=cap,
                                              shape_message=plan_shape_message(cap),
                                              count_message=COUNT_MESSAGE),
                      f"{where} the launcher says{_mistake(src, padded, real, steps, top_k)}")
        if src.shape[0] > 2 * padded or src.shape[1] > 2 * cap:
            wrong(f"{where} your plan is {tuple(src.shape)}; [{padded}, {cap}] is all it needs")
    return report(True, "one row per padded row, steps * top_k columns per row", "")


def draw_spill(arena, rows_owned: int, row_width: int, title: str = "") -> None:
    """The plan arena as rows of ``row_width`` entries: the rows the call was given (blue where
    written), and the rows past them (red where the unchecked launch wrote into them)."""
    a = np.asarray(device.to_host(arena)).reshape(-1, row_width)
    colors = np.where(a != -1, 1, 0)
    colors[rows_owned:][a[rows_owned:] != -1] = 2
    colors[1:rows_owned][a[1:rows_owned] != -1] = 2          # row 1 is a padding row: nothing of its own
    fig, (ax,) = figure(8, 0.45 * a.shape[0] + 1)
    draw_grid(ax, a, colors=colors, annotate=False,
              row_labels=[f"row {r}" + (" (padding)" if r == 1 else "") if r < rows_owned else f"guard {r}"
                          for r in range(a.shape[0])],
              title=title or "miss_src arena: blue = row 0's own entries, red = written into memory of another row")
    ax.axhline(rows_owned - 0.5, color="black", linewidth=2)
    ax.set_xlabel("column (entry index within a row)")
    show(fig)
