"""The two-world device layer: the one module that imports ``numba.cuda``.

hisparse-numba runs the same kernels in two worlds:

* ``"cuda"``: a real NVIDIA GPU. Device buffers are CuPy arrays, the host KV pool is
  mapped pinned memory that kernels read over PCIe without a copy.
* ``"simulator"``: Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) on a CPU-only
  machine. Device buffers are NumPy arrays and every "kernel" runs as Python threads.

The world is chosen once per process, before Numba is imported, from the environment
variable ``HISPARSE_NUMBA_BACKEND`` (``auto``, ``cuda``, ``simulator`` or ``compile-only``: every
launch is compiled to PTX for sm_90 instead of run, which catches on a CPU what the simulator never
checks); ``backend`` makes that choice. Two concerns live beside this module and are re-exported
from it: the on-disk kernel cache (``kernel_cache``) and CUDA graphs (``graphs``).

Kernel modules write ``from ..device import cuda`` and launch through :func:`launch`, so that no
other module knows which world it is in. ``docs/two-worlds.md`` explains the design.

Lessons: every lesson starts from ``backend()``, ``xp``, ``to_device``/``to_host``; lesson 00 also
launches a kernel by hand with ``launch`` and ``byte_words``; lesson 10 checks ``data_address``
(the 16-byte rule); lesson 11 teaches ``host_cache_array`` and ``is_mapped`` (the mapped host pool).
"""

from __future__ import annotations

import functools
import os

import numpy as np

# The order matters: ``backend`` chooses the world and ``kernel_cache`` sets the cache location,
# both before Numba is imported.
from . import fast_launch, kernel_cache, simulator_threads
from .backend import BACKEND as _BACKEND
from .backend import BACKEND_ENV, ROW_STACK_SHIM
from .graphs import CapturedGraph, capture_graph
from .kernel_cache import (
    CACHE_DIR_ENV,
    KERNEL_CACHE_ENV,
    inline_mode,
    kernel_cache_dir,
    kernel_cache_enabled,
    kernel_cache_info,
    source_digest,
)

from numba import cuda  # noqa: E402  (must follow the world's choice)

# How the package's device functions declared ``inline=True`` are inlined. Numba's own meaning is
# inlining in its IR, which types the inlined body again at every call site: the speculative
# swap-in's tuned kernel then spends about two minutes in Numba's front end (132 of its 134 CPU
# seconds to PTX). By default (``HISPARSE_NUMBA_INLINE=nvvm``) each such function is compiled once
# and NVVM inlines it (``forceinline``, the ``alwaysinline`` attribute): the same kernel reaches PTX
# in about 9 s, and on an H100 it runs as fast as the last release did (docs/performance.md, "the
# 2% guard rail"). ``HISPARSE_NUMBA_INLINE=numba`` restores Numba's meaning. Functions defined
# outside the package (a learner's) keep Numba's meaning; the simulator runs Python and inlines
# nothing.
INLINE_MODE = inline_mode()
if INLINE_MODE not in ("nvvm", "numba"):
    raise ValueError(f"HISPARSE_NUMBA_INLINE must be 'nvvm' or 'numba', got {INLINE_MODE!r}")


def _inline_in_nvvm(jit):
    """``jit`` (``numba.cuda.jit``) with ``inline=True`` read as ``forceinline=True`` for
    functions of this package."""
    def package_jit(func_or_sig=None, **options):
        if options.get("inline") is not True:
            return jit(func_or_sig, **options) if func_or_sig is not None else jit(**options)
        signature = () if func_or_sig is None or callable(func_or_sig) else (func_or_sig,)
        in_nvvm = dict(options, inline="never", forceinline=True)

        def decorate(func):
            ours = (getattr(func, "__module__", None) or "").startswith(__package__ + ".")
            return jit(*signature, **(in_nvvm if ours else options))(func)

        return decorate(func_or_sig) if callable(func_or_sig) else decorate

    package_jit.hisparse_inline = "nvvm"
    return package_jit


if _BACKEND != "simulator" and INLINE_MODE == "nvvm" and \
        getattr(cuda.jit, "hisparse_inline", None) != "nvvm":
    cuda.jit = _inline_in_nvvm(cuda.jit)

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
    from numba.cuda.simulator import kernelapi as _kernelapi  # noqa: E402
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray  # noqa: E402

    def _allocate_shared(shape, dtype):
        """A new shared array as the simulator allocates one (through its module's ``np``)."""
        if isinstance(dtype, _kernelapi.types.Type):
            dtype = _kernelapi.numpy_support.as_dtype(dtype)
        return _kernelapi.np.empty(shape, dtype)

    simulator_threads.lock_shared_allocation(_kernelapi.FakeCUDAShared, _allocate_shared)

if _BACKEND == "cuda":
    from numba.cuda.dispatcher import CUDACache as _CUDA_CACHE  # noqa: E402

    _CUPY_CURRENT_STREAM = xp.cuda.get_current_stream
else:
    _CUPY_CURRENT_STREAM = _CUDA_CACHE = None

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
    if isinstance(a, DeviceWords):  # words of mapped host memory: read them on the host
        return np.asarray(a.owner).reshape(-1).view(np.uint8)[: a.size * 8].view(np.uint64).copy()
    return np.array(a, copy=True)


@functools.cache
def sm_count() -> int:
    """Streaming multiprocessors of the GPU (1 in the simulator and in compile-only mode)."""
    if _BACKEND != "cuda":
        return 1
    return int(xp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"])


def synchronize() -> None:
    """Wait until every launched kernel and copy has finished (a no-op in the simulator)."""
    if _BACKEND == "cuda":   # Numba and CuPy share the device's primary context: one wait covers both
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


def mapped_view(a):
    """A device array over the mapped pinned array ``a`` (``cuda.mapped_array``): what a kernel
    writes into it, the host reads in ``a`` once the kernel is done. Under the simulator, ``a``."""
    if SIMULATOR or COMPILE_ONLY:
        return a
    memory = xp.cuda.UnownedMemory(data_address(a), a.nbytes, a, device_id=xp.cuda.Device().id)
    return xp.ndarray(a.shape, a.dtype, xp.cuda.MemoryPointer(memory, 0))


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


def libdevice_path() -> str | None:
    """Where numba-cuda's own search (conda, the NVVM wheel, ``CUDA_HOME``, /usr/local/cuda) finds
    libdevice, or None; only this piece (its full path search would also load NVRTC first)."""
    from numba.cuda.cuda_paths import _get_libdevice_path

    return _get_libdevice_path().info or None


def kernel_array(a):
    """``a`` as a kernel argument, without copies and without stream syncs.

    On a GPU, CuPy arrays stay as they are: :func:`launch` writes their pointer, shape and
    strides into the kernel's argument list itself. In the simulator NumPy arrays are wrapped
    as the simulator's device arrays in place: the simulator would otherwise copy every
    argument in and out of each launch, and refuse strided views such as ``plan[:, :K]`` that
    a GPU takes as they are.
    """
    if SIMULATOR:
        return FakeCUDAArray(a) if isinstance(a, np.ndarray) and a.ndim > 0 else a
    return a


def _numba_arg(a):
    """``a`` for Numba's own launch path: CuPy arrays as Numba views (``sync=False`` skips the
    stream synchronisation that passing a CuPy array to Numba directly costs)."""
    if _BACKEND == "cuda" and isinstance(a, xp.ndarray):
        return cuda.as_cuda_array(a, sync=False)
    return kernel_array(a)


def jit_kernel(fn=None, *, max_threads: int | None = None):
    """``cuda.jit`` for a kernel, with launch bounds on a GPU when ``max_threads`` is given.

    Launch bounds tell the compiler how many threads a block will have, so it keeps registers
    within what a 1024-thread block can get (without them a large kernel can fail to launch with
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES). The simulator has no such option. The on-disk cache is
    switched on at the kernel's first :func:`launch`, as for every other kernel.
    """
    def wrap(f):
        if _BACKEND == "cuda" and max_threads:
            return cuda.jit(launch_bounds=int(max_threads))(f)
        return cuda.jit(f)

    return wrap(fn) if fn is not None else wrap


def use_disk_cache(kernel) -> None:
    """Let ``kernel`` (a ``cuda.jit`` dispatcher) load and store compiled code on disk, once
    (``kernel_cache`` explains the cache). Saves take the cache directory's lock, so that
    processes compiling at once (warmup's workers, two lessons) keep every entry."""
    lock_cache_saves()
    kernel_cache.use_disk_cache(kernel, _CUDA_CACHE)


def lock_cache_saves() -> bool:
    """:func:`kernel_cache.lock_saves` on Numba's cache index file class."""
    from numba.cuda.core.caching import IndexDataCacheFile

    return kernel_cache.lock_saves(IndexDataCacheFile)


# ---------------------------------------------------------------------------------------------
# Launching. On a GPU, ``launch`` hands each launch to ``fast_launch.FastLauncher`` (the argument
# list written by hand, repeats straight to the driver); it falls back to Numba's public launch,
# :func:`launch_plain`, where the private internals it needs are missing or have changed shape.
# ---------------------------------------------------------------------------------------------

COMPILE_TARGET_CC = (9, 0)
if COMPILE_ONLY:
    # A device function that NVVM inlines is compiled on its own, for the current device's compute
    # capability; without a GPU, for the one compile-only mode targets.
    import types as _types

    from numba.cuda import dispatcher as _dispatcher

    _dispatcher.get_current_device = lambda: _types.SimpleNamespace(compute_capability=COMPILE_TARGET_CC)
compiled_signatures: dict = {}
fast_launch_failures = fast_launch.failures  # why a launch left the fast path (expected empty)


class DeviceWords:
    """A 1-D uint64 view of device-addressable bytes: what :func:`byte_words` returns for memory
    that is not a CuPy array (mapped pinned host memory). Launches read ``ptr`` and ``size``."""

    __slots__ = ("ptr", "size", "owner")
    dtype = np.dtype(np.uint64)
    ndim = 1

    def __init__(self, ptr: int, size: int, owner):
        self.ptr, self.size, self.owner = ptr, size, owner

    @property
    def shape(self):
        return (self.size,)

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.size,), "strides": None, "typestr": "<u8",
                "data": (self.ptr, False), "version": 3}


def current_stream() -> int:
    """The handle of CuPy's current stream (0 for the legacy default stream); kernels go there."""
    return _CUPY_CURRENT_STREAM().ptr if _BACKEND == "cuda" else 0


def launch(kernel, grid, block, *args) -> None:
    """Launch ``kernel[grid, block](*args)`` on CuPy's current stream, in the current world.

    On a GPU the first call for each combination of argument types compiles (or loads from the
    disk cache) the specialisation; later calls only write the argument list and launch
    (``fast_launch``). In ``compile-only`` mode the kernel is compiled to PTX for
    ``COMPILE_TARGET_CC`` with the argument types of this call, and nothing runs; the PTX is kept
    in ``compiled_signatures``.
    """
    if _BACKEND == "cuda":
        _FAST.launch(kernel, grid, block, args)
        return
    args = tuple(kernel_array(a) for a in args)
    if COMPILE_ONLY:
        from numba import typeof

        sig = tuple(typeof(a) for a in args)
        key = (kernel.py_func, sig)
        if key not in compiled_signatures:
            ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=COMPILE_TARGET_CC)
            compiled_signatures[key] = ptx
        return
    run_simulated(kernel, grid, block, args)


def launch_plain(kernel, grid, block, *args) -> None:
    """Numba's own launch path (re-types and converts every argument): the fallback of
    :func:`launch`, and its "before" figure in ``bench startup``."""
    args = tuple(_numba_arg(a) for a in args)
    if _BACKEND == "cuda":
        use_disk_cache(kernel)
        ptr = _CUPY_CURRENT_STREAM().ptr
        if ptr:
            kernel[grid, block, cuda.external_stream(ptr)](*args)
            return
        kernel[grid, block](*args)
        return
    run_simulated(kernel, grid, block, args)


def run_simulated(kernel, grid, block, args) -> None:
    """``kernel[grid, block](*args)`` off the GPU; in the simulator, an error raised by a kernel
    thread reaches the caller only once every thread of the launch has stopped
    (``simulator_threads`` says why)."""
    try:
        kernel[grid, block](*args)
    except BaseException as error:
        if SIMULATOR:
            from numba.cuda.simulator.kernel import BlockThread

            simulator_threads.stop_after_error(error, BlockThread)
        raise


def byte_words(a):
    """The bytes of a C-contiguous buffer as a 1-D uint64 kernel argument (8-byte words).

    Item copies move whole 8-byte words through this view; the caller has checked that
    the buffer is contiguous and that its size and base address are multiples of 16.
    """
    nwords = a.nbytes // 8
    if SIMULATOR or COMPILE_ONLY or not hasattr(a, "__cuda_array_interface__"):
        return a.reshape(-1).view(np.uint8)[: nwords * 8].view(np.uint64)
    key = (id(a), data_address(a), nwords)
    cached = _byte_words.get(key)
    if cached is not None:         # the same view object again: launch can reuse its argument list
        return cached[1]
    if isinstance(a, xp.ndarray):
        words = a.reshape(-1).view(np.uint8)[: nwords * 8].view(np.uint64)
    else:
        words = DeviceWords(key[1], nwords, a)
    if len(_byte_words) >= 16:
        del _byte_words[next(iter(_byte_words))]
    _byte_words[key] = (a, words)  # holds ``a``: its id cannot be reused while cached
    return words


_byte_words: dict = {}

# The GPU's fast launch path (``fast_launch``); its last launch per kernel is ``_last_launch``.
_FAST = fast_launch.FastLauncher(
    cuda, array_type=xp.ndarray, words_type=DeviceWords, current_stream=current_stream,
    plain_launch=launch_plain, numba_arg=_numba_arg, use_disk_cache=use_disk_cache,
) if _BACKEND == "cuda" else None
_last_launch: dict = _FAST.last_launch if _FAST is not None else {}



__all__ = [
    "BACKEND_ENV",
    "CACHE_DIR_ENV",
    "KERNEL_CACHE_ENV",
    "COMPILE_ONLY",
    "ROW_STACK_SHIM",
    "SIMULATOR",
    "backend",
    "CapturedGraph",
    "DeviceWords",
    "byte_words",
    "capture_graph",
    "current_stream",
    "kernel_cache_dir",
    "kernel_cache_enabled",
    "kernel_cache_info",
    "launch_plain",
    "run_simulated",
    "source_digest",
    "use_disk_cache",
    "cuda",
    "data_address",
    "fast_launch_failures",
    "host_cache_array",
    "is_mapped",
    "mapped_view",
    "jit_kernel",
    "kernel_array",
    "libdevice_path",
    "launch",
    "synchronize",
    "to_device",
    "to_host",
    "xp",
]
