"""Plausible wrong answers to the kernel puzzles of lessons 14 and 15, one module per puzzle.

Each module names its puzzle (``PUZZLE = "14-a"``) and lists ``WRONG``: the mistakes learners
make, each with the words its ``wrong:`` line must contain. ``tests/lessons/test_ex14.py`` and
``test_ex15.py`` require every one rejected (races: on every one of ``RACE_RUNS`` runs).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

RACE_RUNS = 20


@dataclass(frozen=True)
class Wrong:
    """A wrong answer: ``kernel`` (or device function), the words its verdict must contain,
    ``simulator_only`` when only the simulator's trace sees the mistake (the bytes come out right,
    or a race happens not to bite on a GPU), how many runs must all reject it, and ``gpu_says``:
    the words required on a GPU instead, where the mistake shows only in the values (``None``: the
    same words)."""

    kernel: object
    says: tuple
    simulator_only: bool = False
    runs: int = 1
    gpu_says: tuple | None = None

    def words(self, simulator: bool) -> tuple:
        return self.says if simulator or self.gpu_says is None else self.gpu_says


def wrong(kernel, *says, simulator_only=False, runs=1, gpu_says=None) -> Wrong:
    return Wrong(kernel, tuple(says), simulator_only, runs, gpu_says)


def race(kernel, *says) -> Wrong:
    """A race or a divergent barrier: rejected on every one of ``RACE_RUNS`` runs, by name."""
    return Wrong(kernel, tuple(says), True, RACE_RUNS)


def collect() -> dict:
    """``{puzzle key: [(name, Wrong)]}`` over every module of this package."""
    found: dict = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        entries = [(name, w) for name, w in vars(module).items() if isinstance(w, Wrong)]
        found.setdefault(module.PUZZLE, []).extend(sorted(entries, key=lambda e: e[0]))
    return found
