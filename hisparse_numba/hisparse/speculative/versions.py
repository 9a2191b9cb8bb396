"""The rungs of the speculative swap-in, from the plain kernel to the tuned one.

Each rung is a module of this package that computes exactly what ``reference.py`` computes (every
output and state array), with the same stage names; a rung changes *how* from the rung below.
``load_cache_to_device_buffer_spec_mla(..., version=N)`` and ``launch_unchecked(call, version=N)``
run rung ``N`` (default: the tuned one). Lessons 01, 03, 04 and 08 read version 1 first.
"""

from __future__ import annotations

from ... import version_default
from ...version_default import Version


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
    """``version`` as a rung number (None: the default rung, normally :data:`DEFAULT`); a
    TypeError or ValueError naming ``version`` otherwise."""
    return version_default.check_version(version, VERSIONS, DEFAULT)


def module(version: int):
    """The imported module of rung ``version``."""
    return version_default.rung_module(__package__, VERSIONS, check_version(version))
