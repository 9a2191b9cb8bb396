"""The fast launch path on a GPU: a kernel's argument list written by hand, repeats sent to the driver.

``kernel[grid, block](*args)`` re-types every argument, looks the compiled specialisation up and
converts every CuPy array to a Numba array on each call (50-150 us of host time). On a GPU,
``device.launch`` hands its launches to a :class:`FastLauncher`, which

* keys each call by the cheap facts that decide the argument types (dtype, ndim, contiguity of
  arrays; the Python type of scalars) and finds the compiled kernel once per key;
* writes the kernel's argument list itself (pointer, shape and strides of each CuPy array;
  Numba's own marshalling for any other kind of argument) and launches it with ``cuda.core``;
* reuses the last argument list of a kernel when the arguments are the same objects, rewriting
  only the words of the arguments that changed (a decode loop passes the same buffers each step);
* sends a launch repeated exactly as it was straight to ``cuLaunchKernel``, with the argument
  block that ``cuda.core``'s packer made once.

It reaches into private pieces of Numba and ``cuda.core`` (:func:`find_internals` lists them; the
compiled kernel's ``_codelibrary``, ``argument_types`` and ``_prepare_args``; ``cuda.core``'s
``ParamHolder``). When one is missing or has changed shape, launches go through Numba's public
launch (``device.launch_plain``): same results, more host time per launch. One
:class:`FastLaunchFallback` warning says so, once per process; :data:`failures` keeps every reason.

This module imports nothing from the package: ``device`` (the one module that imports
``numba.cuda``) builds the launcher and hands it ``numba.cuda`` and its own helpers.
``docs/architecture.md`` shows where it sits; ``docs/two-worlds.md`` explains the two worlds.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from typing import Callable, NamedTuple

import numpy as np

# Why a launch left the fast path (expected empty); ``device.fast_launch_failures`` is this list.
failures: list = []
_warned = False


class FastLaunchFallback(RuntimeWarning):
    """The fast launch path is (partly) off in this process; kernels still run, with more host time."""


def note_failure(reason: str) -> None:
    """Record why the fast path was left, and warn the first time in this process."""
    global _warned
    failures.append(reason)
    if not _warned:
        _warned = True
        warnings.warn(f"hisparse-numba launches kernels through Numba's public launch from now on "
                      f"({reason}): results are the same, each launch costs more host time",
                      FastLaunchFallback, stacklevel=3)


class Internals(NamedTuple):
    """The private pieces of Numba and ``cuda.core`` the fast path calls."""

    typeof: Callable            # numba.cuda.typing.typeof.typeof
    argument_purpose: object    # numba.cuda.typing.typeof.Purpose.argument
    normalize_dims: Callable    # numba.cuda.errors.normalize_kernel_dimensions
    cooperative_keyword: str    # LaunchConfig's keyword for a cooperative launch
    launch_config: Callable     # cuda.core.LaunchConfig
    stream_from_handle: Callable  # cuda.core.Stream.from_handle
    core_launch: Callable       # cuda.core.launch


_PREPARE_ARGS = ("self", "ty", "val", "stream", "retr", "kernelargs")


def find_internals(cuda, core=None) -> Internals | str:
    """The private pieces the fast path needs, from ``cuda`` (``numba.cuda``) and ``core``
    (``cuda.core``, imported when not given); a sentence naming the first one that is missing or
    has changed shape."""
    try:
        typeof_module = cuda.typing.typeof
        pieces = [typeof_module.typeof, typeof_module.Purpose.argument,
                  cuda.errors.normalize_kernel_dimensions,
                  "is_cooperative" if cuda._compat.CUDA_CORE_GE_1_0 else "cooperative_launch"]
        params = tuple(inspect.signature(cuda.dispatcher._Kernel._prepare_args).parameters)
    except (AttributeError, TypeError, ValueError) as exc:
        return f"numba.cuda lacks what the fast path uses: {type(exc).__name__}: {exc}"
    if params != _PREPARE_ARGS:
        return f"numba.cuda's _Kernel._prepare_args takes {params}, not {_PREPARE_ARGS}"
    try:
        core = importlib.import_module("cuda.core") if core is None else core
        pieces += [core.LaunchConfig, core.Stream.from_handle, core.launch]
    except (ImportError, AttributeError) as exc:
        return f"cuda.core lacks what the fast path uses: {type(exc).__name__}: {exc}"
    return Internals(*pieces)


def find_driver_launch():
    """``(ParamHolder, cuLaunchKernel, CUDA_SUCCESS)``: ``cuda.core``'s argument packer and the
    driver's launch, for repeated launches; None where this cuda.core or cuda-python lacks them."""
    try:
        from cuda import bindings
        from cuda.bindings import driver
    except Exception:       # noqa: BLE001 - an older cuda-python
        return None
    major = bindings.__version__.split(".")[0]
    for name in (f"cuda.core.cu{major}._kernel_arg_handler", "cuda.core._kernel_arg_handler",
                 "cuda.core.experimental._kernel_arg_handler"):
        try:
            return importlib.import_module(name).ParamHolder, driver.cuLaunchKernel, driver.CUresult.CUDA_SUCCESS
        except Exception:   # noqa: BLE001 - not in this layout of the package
            continue
    return None


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_ARRAY, _WORDS, _OTHER = 0, 1, 2     # how an argument's words are written


class _Entry:
    """A compiled specialisation: its function handle, argument types and launch configurations."""

    __slots__ = ("kernel", "cufunc", "kinds", "argtypes", "configs", "launched")

    def __init__(self, compiled, kinds):
        self.kernel = compiled
        self.cufunc = compiled._codelibrary.get_cufunc().kernel
        self.argtypes = tuple(compiled.argument_types)
        if not callable(getattr(compiled, "_prepare_args", None)):
            raise AttributeError("the compiled kernel has no _prepare_args")
        self.kinds = kinds
        self.configs = {}
        self.launched = False


class LastLaunch:
    """A kernel's last launch: its configuration, its arguments (held, so their ids stay theirs),
    their argument list and where each argument's words lie in it."""

    __slots__ = ("grid", "block", "ptr", "args", "stream", "config", "entry", "kargs", "spans", "facts", "raw")

    def __init__(self, grid, block, ptr, args, stream, config, entry, kargs, spans, array_type):
        self.grid, self.block, self.ptr, self.args = grid, block, ptr, args
        self.stream, self.config, self.entry, self.kargs, self.spans = stream, config, entry, kargs, spans
        self.facts = tuple(_array_facts(a, array_type) for a in args)
        self.raw = None     # the packed arguments of a driver launch, once packed (False: unavailable)


def _array_facts(a, array_type):
    return (a.data.ptr, a.shape, a.strides) if type(a) is array_type else None


class FastLauncher:
    """The fast path for one world's array type (CuPy's ``ndarray``) and words type.

    ``plain_launch(kernel, grid, block, *args)`` is Numba's public launch, taken when the fast path
    cannot be; ``numba_arg(a)`` turns an argument into what Numba's ``typeof`` takes;
    ``use_disk_cache(kernel)`` switches the on-disk cache on; ``current_stream()`` is the handle of
    the stream kernels go to.
    """

    def __init__(self, cuda, *, array_type, words_type, current_stream, plain_launch, numba_arg,
                 use_disk_cache, core=None, driver_launch=find_driver_launch):
        self.cuda, self.core = cuda, core
        self.array_type, self.words_type = array_type, words_type
        self.current_stream, self.plain_launch = current_stream, plain_launch
        self.numba_arg, self.use_disk_cache = numba_arg, use_disk_cache
        self.find_driver_launch = driver_launch
        self.internals = None     # Internals once looked up; False: the fast path is off
        self.driver = None        # find_driver_launch() once looked up; False: unavailable
        self.entries: dict = {}   # (kernel, argument keys) -> _Entry, or False: Numba's launch
        self.streams: dict = {}   # stream handle -> cuda.core Stream
        self.last_launch: dict = {}   # kernel -> LastLaunch

    # -------------------------------------------------------------------------- the launch
    def launch(self, kernel, grid, block, args: tuple) -> None:
        """Launch ``kernel[grid, block](*args)`` on the current stream."""
        ptr = self.current_stream()
        last = self.last_launch.get(kernel)
        if last is not None and last.grid == grid and last.block == block and last.ptr == ptr \
                and len(last.args) == len(args):
            kargs = self._patched_argument_list(kernel, last, args)
            if kargs is not None:
                if kargs is last.kargs and self._repeat(last):
                    return
                self.internals.core_launch(last.stream, last.config, last.entry.cufunc, *kargs)
                return
        entry = self._entry(kernel, args)
        if entry is None:
            self.plain_launch(kernel, grid, block, *args)
            return
        if entry.launched:
            self._first_list(kernel, entry, grid, block, ptr, args)
            return
        try:
            self._first_list(kernel, entry, grid, block, ptr, args)
            entry.launched = True
        except Exception as exc:  # noqa: BLE001 - keep working through Numba's launch, and say why
            self.last_launch.pop(kernel, None)
            note_failure(f"{getattr(kernel.py_func, '__qualname__', kernel)}: {type(exc).__name__}: {exc}")
            self.entries[(kernel, tuple(self._arg_key(a) for a in args))] = False
            self.plain_launch(kernel, grid, block, *args)

    def _first_list(self, kernel, entry, grid, block, ptr, args) -> None:
        """Write the whole argument list, launch it through cuda.core and remember it."""
        stream = self.streams.get(ptr)
        if stream is None:
            stream = self.streams[ptr] = self.internals.stream_from_handle(ptr)
        kargs, spans = [], []
        for kind, ty, a in zip(entry.kinds, entry.argtypes, args):
            begin = len(kargs)
            kargs.extend(self._argument_words(entry, kind, ty, a, stream))
            spans.append((begin, len(kargs)))
        config = self._launch_config(entry, grid, block)
        self.internals.core_launch(stream, config, entry.cufunc, *kargs)
        self.last_launch[kernel] = LastLaunch(grid, block, ptr, args, stream, config, entry, kargs, spans,
                                              self.array_type)

    # ------------------------------------------------------------- compiled specialisations
    def _arg_key(self, a):
        """What decides ``a``'s Numba type, cheaply; None when only Numba's typeof can tell."""
        t = type(a)
        if t is self.array_type:
            flags = a.flags
            return (t, a.dtype, a.ndim, flags.c_contiguous, flags.f_contiguous)
        if t is self.words_type:
            return t
        if t is int:
            return t if _INT64_MIN <= a <= _INT64_MAX else None
        if t is bool or t is float or isinstance(a, np.generic):
            return t
        return None

    def _entry(self, kernel, args):
        """The compiled kernel for these arguments' types, or None where Numba's launch must run."""
        keys = tuple(self._arg_key(a) for a in args)
        if None in keys:
            return None
        entry = self.entries.get((kernel, keys))
        if entry is None:
            entry = self.entries[(kernel, keys)] = self._compile(kernel, args)
        return entry or None

    def _compile(self, kernel, args):
        if self.internals is None:
            found = find_internals(self.cuda, self.core)
            if isinstance(found, str):
                note_failure(found)
            self.internals = found if isinstance(found, Internals) else False
        if not self.internals:
            return False
        self.use_disk_cache(kernel)
        argtypes = tuple(self.internals.typeof(self.numba_arg(a), self.internals.argument_purpose) for a in args)
        compiled = kernel.compile(argtypes)
        if (compiled.debug or kernel.targetoptions.get("extensions")
                or getattr(compiled, "launch_config_sensitive", False) or kernel.specialized):
            return False          # launches that Numba's own path must prepare
        kinds = tuple(_ARRAY if type(a) is self.array_type else _WORDS if type(a) is self.words_type
                      else _OTHER for a in args)
        try:
            return _Entry(compiled, kinds)
        except (AttributeError, TypeError) as exc:
            note_failure(f"Numba's compiled kernel has changed shape: {type(exc).__name__}: {exc}")
            return False

    def _launch_config(self, entry, grid, block):
        config = entry.configs.get((grid, block))
        if config is None:
            g, b = self.internals.normalize_dims(grid, block)
            config = self.internals.launch_config(
                grid=g, block=b, shmem_size=0, **{self.internals.cooperative_keyword: entry.kernel.cooperative})
            entry.configs[(grid, block)] = config
        return config

    def _argument_words(self, entry, kind, ty, a, stream) -> list:
        """The words of argument ``a`` in a kernel's argument list (an array: its meminfo and
        parent placeholders, size, item size, data pointer, shape and strides)."""
        if kind == _ARRAY:
            return [0, 0, a.size, a.itemsize, a.data.ptr, *a.shape, *a.strides]
        if kind == _WORDS:
            return [0, 0, a.size, 8, a.ptr, a.size, 8]
        words = []
        entry.kernel._prepare_args(ty, a, stream, [], words)
        return words

    # ------------------------------------------------------------------------- repeats
    def _same_argument(self, old, new, old_facts) -> bool:
        if old is new:   # a CuPy array can be reshaped in place
            return old_facts is None or old_facts == _array_facts(new, self.array_type)
        t = type(new)
        return type(old) is t and (t is int or t is float or t is bool or isinstance(new, np.generic)) \
            and old == new

    def _patched_argument_list(self, kernel, last, args):
        """The argument list for ``args`` made from the kernel's last launch (same grid, block,
        stream and arity): that list itself when every argument is the same, else a copy with the
        words of the arguments that changed rewritten, provided each keeps its type. None when a
        type changed: the caller then writes the whole list."""
        kargs = last.kargs
        changed = None
        for i, (old, new) in enumerate(zip(last.args, args)):
            if self._same_argument(old, new, last.facts[i]):
                continue
            key = self._arg_key(new)          # the type and, for an array, dtype, ndim and layout
            if key is None or key != self._arg_key(old):
                return None
            if changed is None:
                changed = list(kargs)
            begin, end = last.spans[i]
            words = self._argument_words(last.entry, last.entry.kinds[i], last.entry.argtypes[i], new,
                                         last.stream)
            if len(words) != end - begin:
                return None
            changed[begin:end] = words
        if changed is None:
            return kargs
        self.last_launch[kernel] = LastLaunch(last.grid, last.block, last.ptr, args, last.stream, last.config,
                                              last.entry, changed, last.spans, self.array_type)
        return changed

    def _repeat(self, last) -> bool:
        """Launch ``last`` again straight through the driver: its arguments are packed once (by
        cuda.core's own packer) and every later repeat passes the packed block, instead of
        cuda.core's launch packing the words again (about 12 us for a kernel of 120 words on the
        H200's host). False where that path is unavailable: the caller launches through cuda.core."""
        if last.raw is None:
            last.raw = self._pack(last)
        if last.raw is False:
            return False
        func, gx, gy, gz, bx, by, bz, _, params = last.raw
        try:
            err = self.driver[1](func, gx, gy, gz, bx, by, bz, 0, last.ptr, params, 0)[0]
            ok = err == self.driver[2]
        except Exception as exc:   # noqa: BLE001 - refused before launching: cuda.core's launch instead
            err, ok = exc, False
        if not ok:
            note_failure(f"the driver refused a repeated launch ({err!r}); cuda.core's launch from now on")
            self.driver = last.raw = False
        return ok

    def _pack(self, last):
        """The packed argument block of ``last`` and its launch dimensions, or False."""
        if self.driver is None:
            self.driver = self.find_driver_launch() or False
            if not self.driver:
                note_failure("cuda.core's argument packer (ParamHolder) or cuLaunchKernel is missing")
        if not self.driver or last.entry.kernel.cooperative:
            return False
        try:
            holder = self.driver[0](last.kargs)
            (gx, gy, gz), (bx, by, bz) = self.internals.normalize_dims(last.grid, last.block)
            handle = getattr(last.entry.cufunc, "handle", None) or last.entry.cufunc._handle
            return (int(handle), gx, gy, gz, bx, by, bz, holder, holder.ptr)
        except Exception as exc:   # noqa: BLE001 - keep cuda.core's launch, and say why
            note_failure(f"driver launch: {type(exc).__name__}: {exc}")
            self.driver = False
            return False
