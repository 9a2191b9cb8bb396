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
from . import kernel_cache, simulator_threads
from .backend import BACKEND as _BACKEND
from .backend import BACKEND_ENV, ROW_STACK_SHIM
from .graphs import CapturedGraph, capture_graph
from .kernel_cache import (
    CACHE_DIR_ENV,
    KERNEL_CACHE_ENV,
    kernel_cache_dir,
    kernel_cache_enabled,
    kernel_cache_info,
    source_digest,
)

from numba import cuda  # noqa: E402  (must follow the world's choice)

# How the package's device functions declared ``inline=True`` are inlined. Numba's own meaning is
# inlining in its IR, which types the inlined body again at every call site: the speculative
# swap-in's tuned kernel then spends minutes in Numba's front end (132 of its 134 CPU seconds to
# PTX). "nvvm" (the default) compiles each such function once and has NVVM inline it
# (``forceinline``, the ``alwaysinline`` attribute): the same kernel reaches PTX in 9 s.
# ``HISPARSE_NUMBA_INLINE=numba`` restores Numba's IR inlining. Functions defined outside the
# package (a learner's) keep Numba's meaning; the simulator runs Python and inlines nothing.
INLINE_ENV = "HISPARSE_NUMBA_INLINE"
INLINE_MODE = os.environ.get(INLINE_ENV, "nvvm").strip().lower() or "nvvm"
if INLINE_MODE not in ("nvvm", "numba"):
    raise ValueError(f"{INLINE_ENV} must be 'nvvm' or 'numba', got {INLINE_MODE!r}")


def _inline_in_nvvm(jit):
    """``jit`` (``numba.cuda.jit``) with ``inline=True`` read as ``forceinline=True`` for
    functions of this package."""
    def package_jit(func_or_sig=None, **options):
        if options.get("inline") is not True:
            return jit(func_or_sig, **options) if func_or_sig is not None else jit(**options)
        signature = () if func_or_sig is None or callable(func_or_sig) else (func_or_sig,)
        in_nvvm = dict(options, inline="never", forceinline=True)

        def decorate(func):
            ours = getattr(func, "__module__", "").startswith(__package__ + ".")
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
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray  # noqa: E402

if _BACKEND == "cuda":
    from cuda.core import Stream as _CORE_STREAM  # noqa: E402
    from cuda.core import launch as _CORE_LAUNCH  # noqa: E402  (what Numba's own launch calls)
    from numba.cuda.dispatcher import CUDACache as _CUDA_CACHE  # noqa: E402

    _CUPY_NDARRAY = xp.ndarray
    _CUPY_CURRENT_STREAM = xp.cuda.get_current_stream
else:
    _CUPY_NDARRAY = _CORE_LAUNCH = _CORE_STREAM = _CUPY_CURRENT_STREAM = _CUDA_CACHE = None

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
# Launching.
#
# ``kernel[grid, block](*args)`` re-types every argument, looks the compiled specialisation up
# and converts every CuPy array to a Numba array on each call (50-150 us). On a GPU,
# :func:`launch` keys each call by the cheap facts that decide the argument types (dtype, ndim,
# contiguity of arrays; the Python type of scalars), finds the compiled kernel once per key and
# writes the kernel's argument list itself (pointer, shape and strides of each CuPy array).
# Arguments of any other kind go through Numba's own marshalling for that argument.
# ---------------------------------------------------------------------------------------------

COMPILE_TARGET_CC = (9, 0)
if COMPILE_ONLY:
    # A device function that NVVM inlines is compiled on its own, for the current device's compute
    # capability; without a GPU, for the one compile-only mode targets.
    import types as _types

    from numba.cuda import dispatcher as _dispatcher

    _dispatcher.get_current_device = lambda: _types.SimpleNamespace(compute_capability=COMPILE_TARGET_CC)
compiled_signatures: dict = {}

_CUPY_ARRAY, _WORDS, _OTHER = 0, 1, 2
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_fast_entries: dict = {}
_core_streams: dict = {}
_last_launch: dict = {}    # kernel -> its last launch (_LastLaunch; see _patched_argument_list)
fast_launch_failures: list = []  # why a kernel fell back to Numba's launch path (expected empty)


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


def _arg_key(a):
    """What decides ``a``'s Numba type, cheaply; None when only Numba's typeof can tell."""
    t = type(a)
    if t is _CUPY_NDARRAY:
        flags = a.flags
        return (t, a.dtype, a.ndim, flags.c_contiguous, flags.f_contiguous)
    if t is DeviceWords:
        return t
    if t is int:
        return t if _INT64_MIN <= a <= _INT64_MAX else None
    if t is bool or t is float or isinstance(a, np.generic):
        return t
    return None


class _FastEntry:
    __slots__ = ("kernel", "cufunc", "kinds", "argtypes", "configs", "launched")

    def __init__(self, compiled, args):
        self.kernel = compiled
        self.cufunc = compiled._codelibrary.get_cufunc().kernel
        self.argtypes = compiled.argument_types
        self.kinds = tuple(_CUPY_ARRAY if type(a) is _CUPY_NDARRAY else
                           _WORDS if type(a) is DeviceWords else _OTHER for a in args)
        self.configs = {}
        self.launched = False


def _fast_entry(kernel, args):
    """The compiled kernel for these arguments' types, or None where the plain path must run."""
    keys = tuple(_arg_key(a) for a in args)
    if None in keys:
        return None
    key = (kernel, keys)
    entry = _fast_entries.get(key)
    if entry is None:
        from numba.cuda.typing.typeof import Purpose, typeof

        use_disk_cache(kernel)
        argtypes = tuple(typeof(_numba_arg(a), Purpose.argument) for a in args)
        compiled = kernel.compile(argtypes)
        unusual = (compiled.debug or kernel.targetoptions.get("extensions")
                   or getattr(compiled, "launch_config_sensitive", False) or kernel.specialized)
        entry = False if unusual else _FastEntry(compiled, args)
        _fast_entries[key] = entry
    return entry or None


def _launch_config(entry, grid, block):
    config = entry.configs.get((grid, block))
    if config is None:
        from cuda.core import LaunchConfig
        from numba.cuda._compat import CUDA_CORE_GE_1_0
        from numba.cuda.errors import normalize_kernel_dimensions

        g, b = normalize_kernel_dimensions(grid, block)
        coop = {"is_cooperative" if CUDA_CORE_GE_1_0 else "cooperative_launch":
                entry.kernel.cooperative}
        config = LaunchConfig(grid=g, block=b, shmem_size=0, **coop)
        entry.configs[(grid, block)] = config
    return config


def current_stream() -> int:
    """The handle of CuPy's current stream (0 for the legacy default stream); kernels go there."""
    return _CUPY_CURRENT_STREAM().ptr if _BACKEND == "cuda" else 0


def launch(kernel, grid, block, *args) -> None:
    """Launch ``kernel[grid, block](*args)`` on CuPy's current stream, in the current world.

    On a GPU the first call for each combination of argument types compiles (or loads from the
    disk cache) the specialisation; later calls only write the argument list and launch.
    In ``compile-only`` mode the kernel is compiled to PTX for ``COMPILE_TARGET_CC`` with the
    argument types of this call, and nothing runs; the PTX is kept in ``compiled_signatures``.
    """
    if _BACKEND != "cuda":
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
        return
    ptr = _CUPY_CURRENT_STREAM().ptr
    last = _last_launch.get(kernel)
    if last is not None and last.grid == grid and last.block == block and last.ptr == ptr \
            and len(last.args) == len(args):
        kargs = _patched_argument_list(kernel, last, args)
        if kargs is not None:
            if kargs is last.kargs and _repeat_launch(last):
                return
            _CORE_LAUNCH(last.stream, last.config, last.entry.cufunc, *kargs)
            return
    entry = _fast_entry(kernel, args)
    if entry is None:
        launch_plain(kernel, grid, block, *args)
        return
    stream = _core_streams.get(ptr)
    if stream is None:
        stream = _core_streams[ptr] = _CORE_STREAM.from_handle(ptr)
    kargs, spans = [], []
    for kind, ty, a in zip(entry.kinds, entry.argtypes, args):
        begin = len(kargs)
        kargs.extend(_argument_words(entry, kind, ty, a, stream))
        spans.append((begin, len(kargs)))
    config = _launch_config(entry, grid, block)
    if entry.launched:
        _CORE_LAUNCH(stream, config, entry.cufunc, *kargs)
        _last_launch[kernel] = _LastLaunch(grid, block, ptr, args, stream, config, entry, kargs, spans)
        return
    try:
        _CORE_LAUNCH(stream, config, entry.cufunc, *kargs)
        entry.launched = True
    except Exception as exc:  # never seen: keep working through Numba's path, and say why
        fast_launch_failures.append(f"{kernel.py_func.__qualname__}: {type(exc).__name__}: {exc}")
        _fast_entries[(kernel, tuple(_arg_key(a) for a in args))] = False
        launch_plain(kernel, grid, block, *args)


def _driver_launcher():
    """``(ParamHolder, cuLaunchKernel, CUDA_SUCCESS)``: cuda.core's argument packer and the driver's
    launch, for :func:`_repeat_launch`; None where this cuda.core or cuda-python lacks them."""
    import importlib

    try:
        from cuda import bindings
        from cuda.bindings import driver
    except Exception:       # noqa: BLE001 - an older cuda-python: keep cuda.core's launch
        return None
    major = bindings.__version__.split(".")[0]
    for name in (f"cuda.core.cu{major}._kernel_arg_handler", "cuda.core._kernel_arg_handler",
                 "cuda.core.experimental._kernel_arg_handler"):
        try:
            return importlib.import_module(name).ParamHolder, driver.cuLaunchKernel, driver.CUresult.CUDA_SUCCESS
        except Exception:   # noqa: BLE001 - not in this layout of the package
            continue
    return None


_DRIVER_LAUNCH = None   # _driver_launcher() once it has been looked up; False when unavailable


def _repeat_launch(last) -> bool:
    """Launch ``last`` again, argument list and all, straight through the driver: its arguments
    are packed once (by cuda.core's own packer) and every later repeat passes the packed block,
    instead of cuda.core's launch packing the argument words again (about 12 us for a kernel of
    120 words on the H200's host). False where that path is unavailable: the caller launches
    through cuda.core."""
    global _DRIVER_LAUNCH
    raw = last.raw
    if raw is None:
        if _DRIVER_LAUNCH is None:
            _DRIVER_LAUNCH = _driver_launcher() or False
        raw = last.raw = False
        if _DRIVER_LAUNCH and not last.entry.kernel.cooperative:
            try:
                holder = _DRIVER_LAUNCH[0](last.kargs)
                from numba.cuda.errors import normalize_kernel_dimensions

                (gx, gy, gz), (bx, by, bz) = normalize_kernel_dimensions(last.grid, last.block)
                handle = getattr(last.entry.cufunc, "handle", None) or last.entry.cufunc._handle
                raw = last.raw = (int(handle), gx, gy, gz, bx, by, bz, holder, holder.ptr)
            except Exception as exc:   # noqa: BLE001 - keep cuda.core's launch, and say why
                fast_launch_failures.append(f"driver launch: {type(exc).__name__}: {exc}")
                _DRIVER_LAUNCH = False
    if raw is False:
        return False
    func, gx, gy, gz, bx, by, bz, _, params = raw
    try:
        err = _DRIVER_LAUNCH[1](func, gx, gy, gz, bx, by, bz, 0, last.ptr, params, 0)[0]
        ok = err == _DRIVER_LAUNCH[2]
    except Exception as exc:   # noqa: BLE001 - refused before launching: cuda.core's launch instead
        err, ok = exc, False
    if not ok:
        fast_launch_failures.append(f"driver launch: {err!r}; cuda.core's launch from now on")
        _DRIVER_LAUNCH = last.raw = False
    return ok


def _argument_words(entry, kind, ty, a, stream) -> list:
    """The words of argument ``a`` in a kernel's argument list (an array: its meminfo and parent
    placeholders, size, item size, data pointer, shape and strides)."""
    if kind == _CUPY_ARRAY:
        return [0, 0, a.size, a.itemsize, a.data.ptr, *a.shape, *a.strides]
    if kind == _WORDS:
        return [0, 0, a.size, 8, a.ptr, a.size, 8]
    words = []
    entry.kernel._prepare_args(ty, a, stream, [], words)
    return words


def _array_facts(a):
    return (a.data.ptr, a.shape, a.strides) if type(a) is _CUPY_NDARRAY else None


class _LastLaunch:
    """A kernel's last launch from :func:`launch`: its configuration, its arguments (held, so
    their ids stay theirs), their argument list and where each argument's words lie in it."""

    __slots__ = ("grid", "block", "ptr", "args", "stream", "config", "entry", "kargs", "spans", "facts", "raw")

    def __init__(self, grid, block, ptr, args, stream, config, entry, kargs, spans):
        self.grid, self.block, self.ptr, self.args = grid, block, ptr, args
        self.stream, self.config, self.entry, self.kargs, self.spans = stream, config, entry, kargs, spans
        self.facts = tuple(_array_facts(a) for a in args)
        self.raw = None     # the packed arguments of _repeat_launch, once it has run (False: unavailable)


def _same_argument(old, new, old_facts) -> bool:
    if old is new:
        return old_facts is None or old_facts == _array_facts(new)   # a CuPy array can be reshaped
    t = type(new)
    return type(old) is t and (t is int or t is float or t is bool or isinstance(new, np.generic)) \
        and old == new


def _patched_argument_list(kernel, last, args):
    """The argument list for ``args`` made from the kernel's last launch (same grid, block, stream
    and arity): that list itself when every argument is the same (a decode loop passes the same
    buffers at every step), else a copy with the words of the arguments that changed rewritten,
    provided each keeps its type (a new query array each step). None when a type changed: the
    caller then writes the whole list."""
    kargs = last.kargs
    changed = None
    for i, (old, new) in enumerate(zip(last.args, args)):
        if _same_argument(old, new, last.facts[i]):
            continue
        key = _arg_key(new)          # the type and, for an array, dtype, ndim and layout
        if key is None or key != _arg_key(old):
            return None
        if changed is None:
            changed = list(kargs)
        begin, end = last.spans[i]
        words = _argument_words(last.entry, last.entry.kinds[i], last.entry.argtypes[i], new, last.stream)
        if len(words) != end - begin:
            return None
        changed[begin:end] = words
    if changed is None:
        return kargs
    _last_launch[kernel] = _LastLaunch(last.grid, last.block, last.ptr, args, last.stream, last.config,
                                       last.entry, changed, last.spans)
    return changed


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
    "launch",
    "synchronize",
    "to_device",
    "to_host",
    "xp",
]

if _BACKEND == "cuda":     # a lesson's first import on a GPU says when its kernels still compile
    from .compile_notice import print_if_cold

    print_if_cold()
