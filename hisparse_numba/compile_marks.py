"""Which lessons' kernels a GPU's kernel cache holds, and whether a warmup is filling it now.

``warmup`` (and the lessons flow) marks each lesson compiled once every task of that lesson has
run: a file ``lessons-warm/<sources digest>-<rung>/<lesson id>`` in the kernel cache directory, so
an edit of the package's sources (which invalidates every cached kernel, see ``kernel_cache``) or
another lessons' rung (``HISPARSE_NUMBA_VERSION``) makes it cold again. A running warmup holds
the cache's warmup lock (:func:`compiling`). ``compile_notice`` reads both.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .kernel_cache import kernel_cache_dir, source_digest

MARK_DIR = "lessons-warm"
RUNNING_LOCK = "warmup.lock"


def _rung() -> str:
    from .version_default import LESSON_VERSION, VERSION_ENV

    return os.environ.get(VERSION_ENV) or str(LESSON_VERSION)


def mark_path(lesson_id: str) -> Path:
    """The file that says lesson ``lesson_id``'s kernels are in the cache."""
    return Path(kernel_cache_dir(), MARK_DIR, f"{source_digest()[:16]}-{_rung()}", str(lesson_id).zfill(2))


def mark_compiled(lesson_ids) -> None:
    """Mark the lessons ``lesson_ids`` as compiled in this cache (their warmup tasks all ran)."""
    for lesson_id in lesson_ids:
        path = mark_path(lesson_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


@contextlib.contextmanager
def compiling():
    """Within: this process holds the cache's warmup lock, so that :func:`notice` can say that a
    warmup compiles the lessons' kernels right now (a hub's server start runs one)."""
    try:
        import fcntl
    except ImportError:         # no file locks here: no "compiling now" in the notice
        yield
        return
    path = Path(kernel_cache_dir(), MARK_DIR, RUNNING_LOCK)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)        # several warmups may run; a probe takes LOCK_EX
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def warmup_running() -> bool:
    """Whether a process holds the cache's warmup lock (:func:`compiling`)."""
    try:
        import fcntl
    except ImportError:
        return False
    path = Path(kernel_cache_dir(), MARK_DIR, RUNNING_LOCK)
    if not path.exists():
        return False
    with open(path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False
