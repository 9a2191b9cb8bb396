"""The rungs of the speculative swap-in, from the plain kernel to the tuned one.

Each rung is a module of this package that computes exactly what ``reference.py`` computes (every
output and state array), with the same stage names; a rung changes *how* from the rung below.
``load_cache_to_device_buffer_spec_mla(..., version=N)`` and ``launch_unchecked(call, version=N)``
run rung ``N`` (default: the tuned one). Lessons 01, 03, 04 and 08 read version 1 first.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

import numpy as np

from ...version_default import default_version


class Version(NamedTuple):
    number: int
    name: str   # the module in this package
    why: str    # what it changes from the previous rung, and why


VERSIONS = {
    1: Version(1, "v1_plain", "the reference's stages as a kernel, one block per request, a "
               "barrier between stages: the rules, written to be read"),
    2: Version(2, "v2_tiles", "a request's occurrences over many tiles that meet through per-request "
               "flags, so a request fills many SMs; the last tile to arrive commits"),
    3: Version(3, "v3_tuned", "a committer tile commits while the tiles still work, and copier tiles "
               "read the misses from the host before they are numbered"),
}
DEFAULT = 3


def check_version(version) -> int:
    """``version`` as a registered rung number (None: ``DEFAULT``); TypeError or ValueError
    naming ``version`` otherwise."""
    if version is None:
        return default_version(DEFAULT, VERSIONS)
    if isinstance(version, (bool, np.bool_)) or not isinstance(version, (int, np.integer)):
        raise TypeError(f"version must be an int or None, got {type(version).__name__}")
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {sorted(VERSIONS)}, got {version}")
    return int(version)


def module(version: int):
    """The module of rung ``version``."""
    return importlib.import_module(f"{__package__}.{VERSIONS[check_version(version)].name}")
