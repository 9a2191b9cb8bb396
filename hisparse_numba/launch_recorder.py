"""Which kernel specialisations a piece of code launches: the proof that warmup covers the lessons.

:func:`recording_launches` wraps ``device.launch`` (and every package module that imported it by
name) and records each launch as :func:`specialisation` names it: the kernel, its compile-time
closure values and the argument types, the same way in every process. ``warmup`` re-exports it;
``tests/test_warmup_coverage.py`` runs the solved lessons under it and checks that ``warmup
--lessons`` launches every specialisation they do (docs/two-worlds.md).
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
import types

from . import device


def _value_name(value, depth: int = 0) -> str:
    """A compile-time value of a kernel (a closure cell) the same way in every process."""
    func = getattr(value, "py_func", value)
    if isinstance(func, types.FunctionType):
        name = f"{func.__module__}.{func.__qualname__}"
        cells = func.__closure__ or ()
        if cells and depth < 8:
            name += "(" + ", ".join(_value_name(c.cell_contents, depth + 1) for c in cells) + ")"
        return name
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        import hashlib

        import numpy as np

        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:12]
        return f"array({value.dtype}, {tuple(value.shape)}, {digest})"
    if isinstance(value, (bool, int, float, str, type(None))):
        return repr(value)
    return re.sub(r" at 0x[0-9a-f]+", "", f"{type(value).__qualname__}:{value!r}")


def _arg_type(a) -> str:
    """What decides ``a``'s Numba argument type (dtype, dimensions, layout; a scalar's type)."""
    if isinstance(a, bool):
        return "bool"
    if isinstance(a, int):
        return "int64"
    if isinstance(a, float):
        return "float64"
    dtype = getattr(a, "dtype", None)
    if dtype is None:
        return type(a).__qualname__
    ndim = getattr(a, "ndim", 0)
    if ndim == 0:
        return str(dtype)
    flags = getattr(a, "flags", None)
    if flags is None:
        layout = "C"  # DeviceWords: contiguous words
    else:
        layout = "C" if flags["C_CONTIGUOUS"] else "F" if flags["F_CONTIGUOUS"] else "A"
    return f"{dtype}[{ndim}d,{layout}]"


def specialisation(kernel, args) -> str:
    """The compiled specialisation a launch of ``kernel`` with ``args`` uses, as a string: the
    kernel's module and name, its compile-time values (the factory arguments it closes over, and
    the device functions it calls), and its argument types."""
    return f"{_value_name(kernel)} <- ({', '.join(_arg_type(a) for a in args)})"


def _modules(value, depth: int = 0) -> set:
    """The modules of the kernel or device function ``value`` and of every function it closes over."""
    func = getattr(value, "py_func", value)
    if not isinstance(func, types.FunctionType) or depth >= 8:
        return set()
    found = {func.__module__}
    for cell in func.__closure__ or ():
        found |= _modules(cell.cell_contents, depth + 1)
    return found


LEARNER_MARK = "(not hisparse-numba) "


def is_package_kernel(kernel) -> bool:
    """True when the kernel and every function it closes over come from hisparse-numba (not a
    learner's kernel or device function written in a notebook, which no warmup can know)."""
    return all(m.split(".")[0] == "hisparse_numba" for m in _modules(kernel))


# Functions that turn a call's runtime sizes into a kernel's compile-time values differently on a
# GPU (from the SM count) and in the simulator. The recorder notes their arguments too, so that a
# simulator run proves that warmup meets the same sizes, hence the same GPU configurations.
GEOMETRY_FUNCTIONS = (("hisparse_numba.hisparse.speculative.tiling", "geometry"),)


@contextlib.contextmanager
def recording_launches(sink: set | None = None, log_path: str | None = None):
    """Within the block, every :func:`device.launch` adds its :func:`specialisation` to ``sink``
    (a new set unless given; yielded), prefixed with ``LEARNER_MARK`` when the kernel is not all
    hisparse-numba's, and every call of a :data:`GEOMETRY_FUNCTIONS` function adds
    ``module.function(args)``. With ``log_path``, each new entry is also appended to that file as
    a line (so a process that is killed keeps what it recorded)."""
    seen = set() if sink is None else sink

    def note(key):
        if key not in seen:
            seen.add(key)
            if log_path:
                with open(log_path, "a") as f:
                    f.write(key + "\n")

    original = device.launch

    def launch(kernel, grid, block, *args):
        key = specialisation(kernel, args)
        note(key if is_package_kernel(kernel) else LEARNER_MARK + key)
        return original(kernel, grid, block, *args)

    def noting(module, name, fn):
        def geometry(*args):
            note(f"{module}.{name}({', '.join(repr(int(a)) for a in args)})")
            return fn(*args)
        return geometry

    wrapped = []
    for module, name in GEOMETRY_FUNCTIONS:
        mod = importlib.import_module(module)
        wrapped.append((mod, name, getattr(mod, name)))
        setattr(mod, name, noting(module, name, getattr(mod, name)))
    # device.launch, and every package module that imported it by name (``from .device import
    # launch``); a module imported inside the block binds the recording launch itself
    for mod in _package_modules():
        if getattr(mod, "launch", None) is original:
            mod.launch = launch
    try:
        yield seen
    finally:
        for mod in _package_modules():
            if getattr(mod, "launch", None) is launch:
                mod.launch = original
        for mod, name, fn in wrapped:
            setattr(mod, name, fn)


def _package_modules() -> list:
    return [m for n, m in list(sys.modules.items())
            if m is not None and (n == "hisparse_numba" or n.startswith("hisparse_numba."))]
