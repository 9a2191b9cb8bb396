"""The rung a launcher runs when its caller passes ``version=None``.

Each kernel family with a ladder of versions (``single_step/versions.py``,
``speculative/versions.py``) defaults to its tuned rung. ``HISPARSE_NUMBA_VERSION`` changes that
default for every family at once: ``1`` (the plain rungs the lessons point to, which also compile
faster: the lessons' default, set by ``hisparse-numba lessons run``, the ``hisparse-numba``
Jupyter kernel and the hub image) or ``tuned`` (unset: the tuned rungs). A launcher given an explicit ``version=``
ignores it.
"""

from __future__ import annotations

import os

VERSION_ENV = "HISPARSE_NUMBA_VERSION"
LESSON_VERSION = 1      # the rung the lessons run: plain, every family has it


def default_version(tuned: int, versions) -> int:
    """The rung ``version=None`` means in a family whose tuned rung is ``tuned`` and whose rungs
    are ``versions``: ``HISPARSE_NUMBA_VERSION`` when set (ValueError naming it when that family
    has no such rung), else ``tuned``."""
    text = os.environ.get(VERSION_ENV, "").strip().lower()
    if text in ("", "tuned"):
        return tuned
    if not text.isdigit() or int(text) not in versions:
        raise ValueError(f"{VERSION_ENV} must be 'tuned' or one of {sorted(versions)}, got {text!r}")
    return int(text)
