"""The one-line notice a lesson prints on a GPU whose kernel cache does not hold its kernels yet.

On a GPU each kernel specialisation compiles at its first launch (seconds to tens of seconds), so a
lesson's first cells can sit silent for a while on a cold machine. Every lesson's first cell (the
setup cell, ``lessons/colab.py``) calls :func:`print_if_cold`: inside a Jupyter kernel, on a GPU
with the on-disk kernel cache on, when the lesson's kernels are not marked compiled in that cache,
it prints one line: that this lesson's kernels compile on their first use, for about
how long (the sum of its warmup tasks' ``Task.seconds``), and either that a warmup is compiling
them now (one holds the cache's warmup lock: :func:`compiling`) or the command that compiles them
all at once. Nothing is printed in the simulator, outside Jupyter, or on a warm cache.

"Compiled" is the mark ``warmup`` writes per lesson (``compile_marks``).
"""

from __future__ import annotations

import os
import re
import sys

from .compile_marks import mark_path, warmup_running
from .kernel_cache import kernel_cache_enabled

SESSION_ENV = "JPY_SESSION_NAME"        # the notebook's path, set by Jupyter Server for its kernels
WARMUP_COMMAND = "hisparse-numba warmup --lessons"


def current_lesson() -> str | None:
    """The id of the lesson notebook this kernel runs (``NN-name.ipynb`` in Jupyter Server's
    session name), or None when it is not known."""
    match = re.match(r"(\d\d)-.*\.ipynb$", os.path.basename(os.environ.get(SESSION_ENV, "")))
    return match.group(1) if match else None


def notice(lesson_id: str | None = None, backend: str | None = None) -> str | None:
    """The line to print for lesson ``lesson_id`` (None: the lessons as a whole) on ``backend``
    (default: this process's), or None when nothing compiles that the cache lacks."""
    from . import warmup
    from .backend import BACKEND

    if (backend or BACKEND) != "cuda" or not kernel_cache_enabled():
        return None
    tasks = [t for t in warmup.LESSON_TASKS if not t.simulator_only]
    if lesson_id is not None:
        tasks = [t for t in tasks if str(lesson_id).zfill(2) in t.lessons]
        ids = [str(lesson_id).zfill(2)]
    else:
        ids = sorted({i for t in tasks for i in t.lessons})
    cold = [i for i in ids if not mark_path(i).exists()]
    if not tasks or not cold:
        return None
    seconds = sum(t.seconds for t in tasks if set(t.lessons) & set(cold))
    which = f"lesson {lesson_id}'s kernels" if lesson_id is not None else "the lessons' kernels"
    then = ("a warmup is compiling them in the background now" if warmup_running() else
            f"`{WARMUP_COMMAND}` compiles every lesson's at once")
    return (f"compiling: {which} are not in this GPU's kernel cache yet, so the cells that launch "
            f"them first compile them (about {seconds:.0f} s in all, once); {then}")


def print_if_cold() -> None:
    """Print :func:`notice` for the current lesson in a Jupyter kernel (see the module docstring);
    never raises (a notice must not break an import)."""
    if "ipykernel" not in sys.modules:
        return
    try:
        line = notice(current_lesson())
    except Exception:       # noqa: BLE001 - an unreadable cache folder: no notice
        return
    if line:
        print(line, flush=True)
