"""Lesson 04 (2-4 speculative steps): the exercise checker and the lesson's figure."""

from __future__ import annotations

import numpy as np

from .common import checker, draw_grid, figure, learner_answer, report, show, wrong

EXPECTED = {1: "single-step", 2: "speculative", 3: "speculative", 4: "speculative"}
ANSWERS = ("single-step", "speculative", "fewer drafts")


@checker
def check_choose(choose) -> bool:
    """Exercise 04-a: ``choose(num_steps)`` names the tool for a selection of ``num_steps`` rows per
    request: ``"single-step"`` (1), ``"speculative"`` (2-4) or ``"fewer drafts"`` (5 or more)."""
    for steps in range(1, 9):
        want = EXPECTED.get(steps, "fewer drafts")
        got = learner_answer(choose, steps)
        if got not in ANSWERS:
            wrong(f"choose({steps}) returned {got!r}; the answers are {', '.join(map(repr, ANSWERS))}")
        if got != want:
            why = {"single-step": "one selection per request is ordinary decode: the single-step LRU kernel",
                   "speculative": "2 to 4 steps is what the speculative state is built for",
                   "fewer drafts": "more than 4 steps overflows the per-request metadata sized for 4"}[want]
            wrong(f"choose({steps}) returned {got!r}; the answer is {want!r} ({why})")
    return report(True, "1 step: single-step kernel; 2-4: speculative; more: cap the draft count", "")


def draw_metadata_rows(state_steps: int, call_steps: int, top_k: int, requests: int = 2) -> None:
    """Each request's row of per-call miss metadata (``5 * steps * top_k`` words, drawn in units of
    ``top_k`` words) as allocated for ``state_steps``, and where a ``call_steps`` call writes."""
    unit = 5
    per_row = unit * state_steps
    need = unit * call_steps
    cols = requests * per_row + max(0, need - per_row)
    owner = np.full((1, cols), -1)
    colors = np.zeros((1, cols), int)
    for r in range(requests):
        owner[0, r * per_row:(r + 1) * per_row] = r
        colors[0, r * per_row:r * per_row + min(need, per_row)] = 1
    for r in range(requests):
        colors[0, (r + 1) * per_row:min(r * per_row + need, cols)] = 2
    fig, (ax,) = figure(9, 1.8)
    draw_grid(ax, owner, colors=colors, annotate=cols <= 60, row_labels=["owner"],
              title=f"scratch_state rows built for {state_steps} steps; a {call_steps}-step call writes "
                    f"{need} x top_k words per request (red: into the next request's row or past the end)")
    ax.set_xlabel(f"word / top_k (top_k = {top_k})")
    show(fig)
