"""The two-world device layer: the one module that imports ``numba.cuda``.

hisparse-numba runs the same kernels in two worlds:

* ``"cuda"``: a real NVIDIA GPU. Device buffers are CuPy arrays, the host KV pool is
  mapped pinned memory that kernels read over PCIe without a copy.
* ``"simulator"``: Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) on a CPU-only
  machine. Device buffers are NumPy arrays and every "kernel" runs as Python threads.

The world is chosen once per process, before Numba is imported, from the environment
variable ``HISPARSE_NUMBA_BACKEND``:

* ``auto`` (default): ``cuda`` when a CUDA driver reports at least one device, else
  ``simulator``. A ``NUMBA_ENABLE_CUDASIM=1`` already set by the user wins.
* ``cuda``: require a GPU (``RuntimeError`` at import when there is none).
* ``simulator``: force the simulator even on a GPU machine.
* ``compile-only``: no GPU and no simulator; every launch is compiled to PTX for sm_90
  instead of run. CPU-only CI uses it to catch what the simulator never checks (types,
  constant shared-array sizes). Needs NVVM (``numba-cuda[cu13]``).

Kernel modules write ``from ..device import cuda`` and launch through :func:`launch`, so that no
other module knows which world it is in. ``docs/two-worlds.md`` explains the design.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
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


_BACKEND = _choose_backend()
if _BACKEND == "simulator":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
else:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "0")

# One block per request is the design of these kernels, not a mistake: keep Numba quiet about it.
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

from numba import cuda  # noqa: E402  (must follow the simulator switch)

if _BACKEND == "cuda":
    try:
        import cupy as xp  # noqa: E402
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "a CUDA GPU is usable but CuPy is not installed: pip install 'hisparse-numba[cuda12]' "
            "or '[cuda13]' (the CUDA major of your driver), or set HISPARSE_NUMBA_BACKEND=simulator"
        ) from exc
else:
    xp = np
if _BACKEND == "simulator":
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray  # noqa: E402

SIMULATOR = _BACKEND == "simulator"
COMPILE_ONLY = _BACKEND == "compile-only"
if COMPILE_ONLY:
    xp = np


def backend() -> str:
    """``"cuda"`` on a usable GPU, ``"simulator"`` under Numba's CUDA simulator."""
    return _BACKEND


def to_device(a) -> "xp.ndarray":
    """Copy a host array to the device (a CuPy array; a NumPy copy in the simulator)."""
    return xp.array(a, copy=True)


def to_host(a) -> np.ndarray:
    """A NumPy copy of a device, mapped or host array."""
    if _BACKEND == "cuda" and isinstance(a, xp.ndarray):
        return xp.asnumpy(a)
    return np.array(a, copy=True)


@functools.cache
def sm_count() -> int:
    """Streaming multiprocessors of the GPU (1 in the simulator and in compile-only mode)."""
    if _BACKEND != "cuda":
        return 1
    return int(xp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"])


def synchronize() -> None:
    """Wait until every launched kernel and copy has finished (a no-op in the simulator)."""
    if _BACKEND == "cuda":
        cuda.synchronize()
        xp.cuda.runtime.deviceSynchronize()


def host_cache_array(shape, dtype) -> np.ndarray:
    """A zero-copy host buffer for the host KV pool, filled with zeros.

    On a GPU this is mapped pinned memory (``cuda.mapped_array``): a NumPy array the host
    writes directly, which kernels read over PCIe without any copy. Under the simulator it
    is a plain NumPy array. Its base address is 16-byte aligned in both worlds.
    """
    if SIMULATOR or COMPILE_ONLY:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        raw = np.zeros(nbytes + 16, dtype=np.uint8)
        start = (-raw.ctypes.data) % 16
        return raw[start:start + nbytes].view(dtype).reshape(shape)
    a = cuda.mapped_array(shape, dtype=dtype)
    a[...] = 0
    return a


def is_mapped(a) -> bool:
    """True when ``a`` is host memory that kernels can read without a copy."""
    if SIMULATOR or COMPILE_ONLY:
        return isinstance(a, np.ndarray)
    return isinstance(a, np.ndarray) and hasattr(a, "__cuda_array_interface__")


def data_address(a) -> int:
    """The address of ``a``'s first element (device address for device/mapped arrays)."""
    if hasattr(a, "__cuda_array_interface__"):
        return int(a.__cuda_array_interface__["data"][0])
    return int(a.__array_interface__["data"][0])


def kernel_array(a):
    """``a`` as a kernel argument, without copies and without stream syncs.

    CuPy arrays become Numba device-array views (``sync=False`` skips the per-launch
    stream synchronisation that passing a CuPy array directly costs); mapped arrays pass
    through unchanged. In the simulator NumPy arrays are wrapped as the simulator's device
    arrays in place: the simulator would otherwise copy every argument in and out of each
    launch, and refuse strided views such as ``plan[:, :K]`` that a GPU takes as they are.
    """
    if SIMULATOR:
        return FakeCUDAArray(a) if isinstance(a, np.ndarray) and a.ndim > 0 else a
    if COMPILE_ONLY or not isinstance(a, xp.ndarray):
        return a
    return cuda.as_cuda_array(a, sync=False)


def jit_kernel(fn=None, *, max_threads: int | None = None):
    """``cuda.jit`` for a kernel, with launch bounds on a GPU when ``max_threads`` is given.

    Launch bounds tell the compiler how many threads a block will have, so it keeps registers
    within what a 1024-thread block can get (without them a large kernel can fail to launch with
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES). The simulator has no such option.
    """
    def wrap(f):
        if _BACKEND == "cuda" and max_threads:
            return cuda.jit(launch_bounds=int(max_threads))(f)
        return cuda.jit(f)

    return wrap(fn) if fn is not None else wrap


COMPILE_TARGET_CC = (9, 0)
compiled_signatures: dict = {}


def launch(kernel, grid, block, *args) -> None:
    """Launch ``kernel[grid, block](*args)`` in the current world.

    In ``compile-only`` mode the kernel is compiled to PTX for ``COMPILE_TARGET_CC`` with the
    argument types of this call, and nothing runs; the PTX is kept in ``compiled_signatures``.
    """
    args = tuple(kernel_array(a) for a in args)
    if COMPILE_ONLY:
        from numba import typeof

        sig = tuple(typeof(a) for a in args)
        key = (kernel.py_func, sig)
        if key not in compiled_signatures:
            ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=COMPILE_TARGET_CC)
            compiled_signatures[key] = ptx
        return
    kernel[grid, block](*args)


def byte_words(a):
    """The bytes of a C-contiguous buffer as a 1-D uint64 kernel argument (8-byte words).

    Item copies move whole 8-byte words through this view; the caller has checked that
    the buffer is contiguous and that its size and base address are multiples of 16.
    """
    nwords = a.nbytes // 8
    if SIMULATOR or COMPILE_ONLY or not hasattr(a, "__cuda_array_interface__"):
        return a.reshape(-1).view(np.uint8)[: nwords * 8].view(np.uint64)
    desc = {
        "shape": (nwords,),
        "strides": None,
        "typestr": "<u8",
        "data": (data_address(a), False),
        "version": 3,
    }
    return cuda.from_cuda_array_interface(desc, owner=a, sync=False)



__all__ = [
    "BACKEND_ENV",
    "COMPILE_ONLY",
    "ROW_STACK_SHIM",
    "SIMULATOR",
    "backend",
    "byte_words",
    "cuda",
    "data_address",
    "host_cache_array",
    "is_mapped",
    "jit_kernel",
    "kernel_array",
    "launch",
    "synchronize",
    "to_device",
    "to_host",
    "xp",
]
