"""The single-step swap-in's kernel versions: the ladder from the plain kernel to the tuned one.

Each rung is a module of this package (``v1_plain.py``, ``v2_tuned.py``) with the same factory,
``swap_in_kernel(num_top_k, hot_buffer_size, block_size, record_plan, skip_io)``, the same kernel
arguments, grid and block, and ``shared_memory_bytes(K, H, block_size)``; every rung matches the
NumPy reference exactly. A module's docstring opens with the line that :attr:`Version.why` holds.
``launch.py`` launches any rung (``version=``; default :data:`DEFAULT`, the tuned one);
``hisparse-numba bench swap-in --versions`` times them; lesson 16 climbs them.
"""

from __future__ import annotations

from ... import version_default
from ...version_default import Version


VERSIONS: dict[int, Version] = {
    1: Version(1, "v1_plain",
               "Version 1, plain: the reference's stages in its order, a barrier between stages, "
               "no tuning."),
    2: Version(2, "v2_tuned",
               "Version 2, tuned: a hash, block scans and registers replace v1's lane scans, "
               "serial ranks and H-sized arrays."),
}
DEFAULT = 2


def check_version(version) -> int:
    """``version`` as a rung number (None: the default rung, normally :data:`DEFAULT`); a
    TypeError or ValueError naming ``version`` otherwise."""
    return version_default.check_version(version, VERSIONS, DEFAULT)


def module(version: int):
    """The imported module of rung ``version``."""
    return version_default.rung_module(__package__, VERSIONS, check_version(version))
