"""The choice of world, made once per process before Numba is imported.

``device`` imports this module first: the simulator switch (``NUMBA_ENABLE_CUDASIM``) must be set
before ``numba`` loads, so the CUDA driver is asked directly through ctypes, and nothing here
imports Numba. ``BACKEND`` is one of:

* ``"cuda"``: a usable NVIDIA GPU;
* ``"simulator"``: Numba's CUDA simulator on the CPU;
* ``"compile-only"``: no GPU and no simulator; ``device.launch`` compiles to PTX instead of running.

``HISPARSE_NUMBA_BACKEND`` picks it (``auto``, the default, takes ``cuda`` when the driver reports
a device, else ``simulator``; a ``NUMBA_ENABLE_CUDASIM=1`` already set by the user wins).
``docs/two-worlds.md`` explains the design; lesson 00 teaches its errors.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np

# numba-cuda 0.30 calls numpy.row_stack, which NumPy 2.5 removed. The GPU machine's image
# ships NumPy 2.5, so patch the alias back before Numba is imported (a no-op on NumPy < 2.5).
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
    ROW_STACK_SHIM = True
else:
    ROW_STACK_SHIM = False

BACKEND_ENV = "HISPARSE_NUMBA_BACKEND"
_CHOICES = ("auto", "cuda", "simulator", "compile-only")


def _gpu_count_from_driver() -> int:
    """Number of CUDA devices the driver reports, 0 when there is no usable driver.

    Asks libcuda directly through ctypes so that the answer is known before Numba is
    imported (the simulator switch must be set before that import).
    """
    names = ["libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda")]
    for name in filter(None, names):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if lib.cuInit(0) != 0:
                return 0
            count = ctypes.c_int(0)
            if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
                return 0
            return count.value
        except AttributeError:
            return 0
    return 0


def _choose_backend() -> str:
    choice = os.environ.get(BACKEND_ENV, "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ValueError(f"{BACKEND_ENV} must be one of {', '.join(_CHOICES)}, got {choice!r}")
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        if choice == "cuda":
            raise RuntimeError(f"{BACKEND_ENV}=cuda but NUMBA_ENABLE_CUDASIM=1 is set")
        return "simulator"
    if choice in ("simulator", "compile-only"):
        return choice
    if _gpu_count_from_driver() > 0:
        return "cuda"
    if choice == "cuda":
        raise RuntimeError(f"{BACKEND_ENV}=cuda but no CUDA device is usable on this machine")
    return "simulator"


BACKEND = _choose_backend()
if BACKEND == "simulator":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
else:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "0")

# One block per request is the design of these kernels, not a mistake: keep Numba quiet about it.
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
