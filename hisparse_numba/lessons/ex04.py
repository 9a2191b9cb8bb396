"""Lesson 04 (2-4 speculative steps): the exercise checker."""

from __future__ import annotations

from .ex05 import _report

EXPECTED = {1: "single-step", 2: "speculative", 3: "speculative", 4: "speculative"}


def check_choose(choose) -> bool:
    """Exercise 04: ``choose(num_steps)`` names the tool for a selection of ``num_steps`` rows per
    request: ``"single-step"`` (1), ``"speculative"`` (2-4) or ``"fewer drafts"`` (5 or more)."""
    for steps in range(1, 9):
        want = EXPECTED.get(steps, "fewer drafts")
        try:
            got = choose(steps)
        except Exception as e:
            return _report(False, "", f"choose({steps}) raised {type(e).__name__}: {e}")
        if got != want:
            return _report(False, "", f"choose({steps}) returned {got!r}; the answer is {want!r}")
    return _report(True, "1 step: single-step kernel; 2-4: speculative; more: cap the draft count", "")
