"""Kernel ladders: a family's rungs (``Version``), the checked ``version=`` of its launchers, and
the rung a launcher runs when its caller passes ``version=None``.

Each kernel family with a ladder of versions (``single_step/versions.py``,
``speculative/versions.py``) defaults to its tuned rung. ``HISPARSE_NUMBA_VERSION`` changes that
default for every family at once: ``1`` (the plain rungs the lessons point to, which also compile
faster: the lessons' default, set by ``hisparse-numba lessons run``, the ``hisparse-numba``
Jupyter kernel and the hub image) or ``tuned`` (unset: the tuned rungs). A launcher given an explicit ``version=``
ignores it.
"""

from __future__ import annotations

import importlib
import os
from typing import NamedTuple

import numpy as np

VERSION_ENV = "HISPARSE_NUMBA_VERSION"


class Version(NamedTuple):
    """One rung of a family's kernel ladder."""

    number: int
    name: str   # module name in the family package
    why: str    # what it changes from the previous rung, and why
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


def check_version(version, versions, tuned: int) -> int:
    """``version`` as a rung number of the family whose rungs are ``versions``: None is the
    default (:func:`default_version`); a bool or a non-integer is a TypeError, an unknown number a
    ValueError, each naming ``version``."""
    if version is None:
        return default_version(tuned, versions)
    if isinstance(version, (bool, np.bool_)) or not isinstance(version, (int, np.integer)):
        raise TypeError(f"version must be an int or None, got {type(version).__name__}")
    if int(version) not in versions:
        raise ValueError(f"version must be one of {sorted(versions)}, got {version}")
    return int(version)


def rung_module(package: str, versions, version: int):
    """The imported module of rung ``version`` of the family ``package``."""
    return importlib.import_module(f"{package}.{versions[version].name}")
