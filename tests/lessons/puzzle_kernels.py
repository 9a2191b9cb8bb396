"""The kernel puzzles' answers, for tests/lessons/test_ex14.py and test_ex15.py.

``solved(lesson)`` runs each section of ``lessons/solutions/NN.py`` as the notebook's solved cell
runs (its checker call included) and returns the kernels it defined and what each section
printed. ``WRONG`` collects the plausible wrong answers of ``wrong_answers/``. ``kernel_stub`` and
``device_stub`` are what a shipped exercise cell holds: a body that raises NotImplementedError.
"""

from __future__ import annotations

import contextlib
import functools
import io
from pathlib import Path

import numpy as np

from hisparse_numba.device import cuda
from hisparse_numba.lessons import solutions

from .wrong_answers import collect

LESSONS_DIR = Path(__file__).resolve().parents[2] / "lessons"
WRONG = collect()


@functools.cache
def solved(lesson: str):
    """``(namespace after every section, {exercise id: printed text})`` of ``lessons/solutions/NN.py``."""
    import importlib

    module = importlib.import_module(f"hisparse_numba.lessons.ex{lesson}")
    namespace = {"np": np, "cuda": cuda, f"ex{lesson}": module}
    printed = {}
    for exercise, source in solutions.read_sections(solutions.solutions_path(LESSONS_DIR, lesson)).items():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(source, f"solutions/{lesson}.py [{exercise}]", "exec"), namespace)
        printed[exercise] = out.getvalue()
    return namespace, printed


@cuda.jit
def kernel_stub(*args):
    # FILL ME IN (roughly 1 line)
    raise NotImplementedError("hint: the shipped cell's stub")


@cuda.jit(device=True, inline=True)
def device_stub(*args):
    # FILL ME IN (roughly 1 line)
    raise NotImplementedError("hint: the shipped cell's stub")
