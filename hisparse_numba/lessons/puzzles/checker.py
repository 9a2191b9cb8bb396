"""A puzzle's verdict: run the learner's kernel on every named case, and on the first wrong one
say why and draw where (``pictures``)."""

from __future__ import annotations

from ..ex00 import verdict
from . import pictures
from .harness import Puzzle, problems_of, run_case


def check(puzzle: Puzzle, learner) -> bool:
    """Run ``learner`` on every case of ``puzzle``; print ``right:``/``wrong:``/``not yet:``."""
    return _check(puzzle, learner)


@verdict
def _check(puzzle: Puzzle, learner):
    cases = puzzle.cases()
    for case in cases:
        run = run_case(puzzle, learner, case)
        found = problems_of(puzzle, run)
        if found:
            text, highlight = found
            pictures.draw_run(puzzle, run, highlight, f"{case.label()}: your kernel is wrong here "
                              "(red outline: a wrong element; red below a grid: past its end)")
            return False, f"{case.label()}: {text}"
    names = ", ".join(c.name for c in cases)
    return True, f"right: all {len(cases)} cases ({names}): {puzzle.right}"
