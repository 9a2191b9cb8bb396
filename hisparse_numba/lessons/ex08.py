"""Lesson 08 (padded batches and reused plan rows): the exercise checker and the lesson's figure."""

from __future__ import annotations

import numpy as np

from ..hisparse.miss_plan import alloc_miss_plan
from ..hisparse.speculative.examples import host_copy
from ..hisparse.speculative import check_speculative, load_cache_to_device_buffer_spec_mla_reference
from .common import (PLAN_KEYS, checker, draw_grid, figure, launcher_says, learner_answer, report, show, spec_problem,
                     wrong)

CASES = ((3, 2), (4, 2), (2, 1))   # (batch, num_real)


def _rows_hint(rows: int, batch: int, num_real: int) -> str:
    if rows == num_real:
        return " (your rows stop at the real requests: padding rows are launched too, and get miss_count 0)"
    if rows == num_real + 1:
        return " (one padding row is not the padded batch: pass a row for each of the batch rows)"
    return ""


@checker
def check_plan_rows(plan_rows) -> bool:
    """Exercise 08-a: ``plan_rows(plan, batch, num_real)`` returns the dict of plan arrays to pass for
    a speculative call whose selection has ``batch`` rows, of which ``num_real`` are real; ``plan``
    holds buffers allocated once for the largest batch. Checked for several (batch, num_real) with the
    launcher's checks and the NumPy reference (the lesson compares the kernel with the reference)."""
    steps, top_k = 2, 8
    for batch, num_real in CASES:
        kw = spec_problem(8, batch=batch, num_real=num_real, steps=steps, top_k=top_k)
        plan = dict(zip(PLAN_KEYS, alloc_miss_plan(6, steps, top_k)))
        answer = learner_answer(plan_rows, plan, batch, num_real)
        if not isinstance(answer, dict):
            wrong(f"plan_rows returned a {type(answer).__name__}; return a dict of plan keywords")
        kw.update({k: None for k in PLAN_KEYS}, **answer)
        rows = min((int(a.shape[0]) for a in answer.values() if hasattr(a, "shape")), default=0)
        hint = _rows_hint(rows, batch, num_real) if len(answer) == len(PLAN_KEYS) else ""
        where = f"for batch {batch} with {num_real} real rows"
        launcher_says(lambda: check_speculative(**kw, item_size_bytes=None),
                      f"{where} the launcher rejects it{hint}")
        want = host_copy(kw)
        load_cache_to_device_buffer_spec_mla_reference(**want)
        if any(int(want["miss_count"][b]) != 0 for b in range(num_real, batch)):
            wrong(f"{where}: a padding row's count was not written")
    return report(True, "rows for the whole padded batch; the padding rows' counts are 0", "")


def draw_padded(counts, num_real: int, stale_rows=(), title: str = "") -> None:
    """A plan's ``miss_count`` per row: real rows blue, padding rows grey, and red where a padding
    row still holds a stale count from an earlier step."""
    counts = np.asarray(counts).reshape(1, -1)
    colors = np.where(np.arange(counts.shape[1]) < num_real, 1, 0).reshape(1, -1)
    for r in stale_rows:
        colors[0, r] = 2
    fig, (ax,) = figure(6, 1.3)
    draw_grid(ax, counts, colors=colors, row_labels=["miss_count"],
              col_labels=[f"row {b}\n{'real' if b < num_real else 'padding'}" for b in range(counts.shape[1])],
              title=title or "blue: real rows; grey: padding rows; red: a stale count left by an earlier step")
    show(fig)


def draw_replay(reused_rows, overwritten: dict) -> None:
    """The device rows a newly admitted request owns (columns) after replays with several
    ``num_real_reqs`` values (rows): red where the replay overwrote the new request's KV."""
    reused_rows = list(reused_rows)
    labels = list(overwritten)
    colors = np.array([[2 if r in overwritten[n] else 3 for r in reused_rows] for n in labels])
    fig, (ax,) = figure(max(6.0, 2.5 + 0.6 * len(reused_rows)), 0.5 * len(labels) + 1.4)
    draw_grid(ax, np.array([reused_rows] * len(labels)), colors=colors,
              row_labels=[f"replay with num_real_reqs={n}" for n in labels],
              title="the new request's device rows: red = overwritten by a stale plan row, green = intact")
    ax.set_xticks([])
    ax.set_xlabel("device row (the number in each cell)")
    show(fig)
