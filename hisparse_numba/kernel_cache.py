"""The on-disk kernel cache: compiled kernels kept between processes (on a GPU only).

Numba's own cache keys a kernel by its bytecode and its closure values, and trusts the source
file's timestamp for the rest. Kernels here call device functions from other modules, and the
factories close over other device functions, so the key below adds a digest of the package's
sources (any edit anywhere invalidates every entry) and names closed-over functions by module
and qualified name instead of pickling them.

``device`` imports this module before Numba (``NUMBA_CACHE_DIR`` must be set first) and switches
the cache on for each kernel at its first launch (``device.use_disk_cache``). Nothing here imports
``numba.cuda``: ``device`` hands in Numba's cache class. ``hisparse-numba warmup`` fills the cache;
``docs/two-worlds.md`` explains why it exists.
"""

from __future__ import annotations

import functools
import hashlib
import os
import types

import numpy as np

from .backend import BACKEND

CACHE_DIR_ENV = "NUMBA_CACHE_DIR"
KERNEL_CACHE_ENV = "HISPARSE_NUMBA_KERNEL_CACHE"
# Compiled kernels live on disk, shared by every process of the machine (see kernel_cache_info).
os.environ.setdefault(CACHE_DIR_ENV, os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    "hisparse-numba", "kernels"))


INLINE_ENV = "HISPARSE_NUMBA_INLINE"


def inline_mode() -> str:
    """Who inlines the package's ``inline=True`` device functions on a GPU: ``"nvvm"`` (the
    default) or ``"numba"`` (``HISPARSE_NUMBA_INLINE``; ``device`` explains the choice)."""
    return os.environ.get(INLINE_ENV, "nvvm").strip().lower() or "nvvm"


def kernel_cache_enabled() -> bool:
    """True on a GPU unless ``HISPARSE_NUMBA_KERNEL_CACHE=0``: compiled kernels go to disk."""
    return BACKEND == "cuda" and os.environ.get(KERNEL_CACHE_ENV, "1") not in ("0", "off", "no")


def kernel_cache_dir() -> str:
    """Where compiled kernels are stored (``NUMBA_CACHE_DIR``; ``~/.cache/hisparse-numba/kernels``)."""
    return os.environ[CACHE_DIR_ENV]


def kernel_cache_info() -> dict:
    """``{"location", "enabled", "entries", "bytes"}`` of the on-disk kernel cache.

    ``entries`` counts compiled specialisations (``.nbc`` files); ``bytes`` is their total size.
    """
    root = kernel_cache_dir()
    entries = size = 0
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith((".nbc", ".nbi")):
                size += os.path.getsize(os.path.join(folder, name))
                entries += name.endswith(".nbc")
    return {"location": root, "enabled": kernel_cache_enabled(), "entries": entries, "bytes": size}


@functools.cache
def source_digest() -> str:
    """SHA-256 of every ``.py`` file of the package and of the inlining mode (:func:`inline_mode`,
    which changes the generated code): part of each cached kernel's key."""
    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256(inline_mode().encode())
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def _stable_bytes(value, depth: int = 0) -> bytes:
    """Bytes that identify a closure value the same way in every process."""
    func = getattr(value, "py_func", value)
    if isinstance(func, types.FunctionType) and depth < 8:
        parts = [f"{func.__module__}.{func.__qualname__}".encode(), func.__code__.co_code]
        for cell in func.__closure__ or ():
            parts.append(_stable_bytes(cell.cell_contents, depth + 1))
        return b"F(" + b",".join(parts) + b")"
    if isinstance(value, np.ndarray):
        return b"A" + str(value.dtype).encode() + repr(value.shape).encode() + value.tobytes()
    return f"{type(value).__module__}.{type(value).__qualname__}:{value!r}".encode()


@functools.cache
def _disk_cache_class(cache_base):
    """Numba's ``CUDACache`` (``cache_base``) with the index key described above."""
    import numba_cuda

    class KernelDiskCache(cache_base):
        def _index_key(self, sig, codegen):
            key = (sig, codegen.magic_tuple(), numba_cuda.__version__,
                   hashlib.sha256(_stable_bytes(self._py_func)).hexdigest(), source_digest())
            if self._launch_config_key is not None:
                key += (("launch_config", self._launch_config_key),)
            return key

    return KernelDiskCache


_cache_checked: set = set()


def use_disk_cache(kernel, cache_base) -> None:
    """Let ``kernel`` (a ``cuda.jit`` dispatcher) load and store compiled code on disk, once.

    ``cache_base`` is Numba's ``CUDACache`` class, handed in by ``device``."""
    if id(kernel) in _cache_checked:
        return
    _cache_checked.add(id(kernel))
    if kernel_cache_enabled():
        try:
            kernel._cache = _disk_cache_class(cache_base)(kernel.py_func)
        except Exception:  # no writable cache location: compile in memory as before
            pass


CACHE_LOCK_NAME = ".hisparse-numba-cache.lock"


def lock_saves(index_file_class) -> bool:
    """Make every save into Numba's on-disk cache hold an exclusive file lock on the cache
    directory, in this process (``index_file_class``: Numba's ``IndexDataCacheFile``, handed in by
    ``device``). Returns False where that cannot be done (no ``fcntl``), True once patched.

    Numba saves an entry by reading the kernel's index, picking the first unused data-file number,
    writing the index and then the data file. Two processes that save specialisations of one
    kernel at the same moment read the same index: the later index write drops the other's entry,
    and both may pick the same number, so that one entry can point at the other's compiled code.
    Holding the lock from the index read to the data write makes the saves of the warmup's worker
    processes happen one after the other (compiling still runs in parallel)."""
    try:
        import fcntl
    except ImportError:
        return False
    save = index_file_class.save
    if getattr(save, "hisparse_locked", False):
        return True

    def locked_save(self, key, data):
        os.makedirs(self._cache_path, exist_ok=True)
        with open(os.path.join(self._cache_path, CACHE_LOCK_NAME), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                save(self, key, data)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    locked_save.hisparse_locked = True
    index_file_class.save = locked_save
    return True
