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
import pytest

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


def compile_solutions(lesson: str):
    """Run the solutions of ``lesson`` under the compile-only backend (every launch compiled to PTX
    for sm_90, nothing run): ``(completed process, number of kernels compiled)``."""
    import os
    import re
    import subprocess
    import sys

    code = f"""
import matplotlib; matplotlib.use("Agg")
from hisparse_numba import device
from tests.lessons import puzzle_kernels as k
_, printed = k.solved("{lesson}")
print("raised" if any("raised" in out for out in printed.values()) else "", "compiled",
      len(device.compiled_signatures))
"""
    env = dict(os.environ, HISPARSE_NUMBA_BACKEND="compile-only", PYTHONPATH=str(LESSONS_DIR.parent))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    found = re.search(r"compiled (\d+)", out.stdout)
    return out, int(found.group(1)) if found else -1


@pytest.fixture(autouse=True)
def close_figures():
    """The checkers draw wrong cases and the tests draw on purpose: close every figure after a test."""
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def all_poison(a) -> bool:
    """Whether output ``a`` holds only POISON (a float32 pool seen as uint64 words: POISON floats)."""
    from hisparse_numba.lessons.puzzles.harness import POISON, poison

    a = np.asarray(a)
    if a.dtype == np.uint64:
        return bool((a.view(np.float32) == POISON).all())
    return bool((a == poison(a.shape, a.dtype)).all())


def last_title() -> str:
    """The title of the figure drawn last (a show_x call draws one)."""
    import matplotlib.pyplot as plt

    fig = plt.figure(plt.get_fignums()[-1]) if plt.get_fignums() else None
    return fig._suptitle.get_text() if fig is not None and fig._suptitle is not None else ""
