"""Python-type checks of the kv-canary launchers' arguments: arrays, integers, flags, ``checks``.

Scalars are validated, never coerced: ``16.5``, ``16.0``, ``inf``, ``nan``, ``'16'``, ``None`` and
``True`` (for an integer) are rejected; Python and NumPy integers are accepted. A wrong Python type
is a ``TypeError``, a value out of range a ``ValueError``; both name the argument.
``docs/kv-canary.md#what-the-launchers-check`` lists every check.
"""

from __future__ import annotations

import numpy as np

from ..checks import fail
from ..device import data_address, xp

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
CHECK_MODES = ("full", "shapes")
_DEVICE_ARRAY = None if xp is np else xp.ndarray  # CuPy: ``a.data.ptr`` is the cheap address


def _type_name(value) -> str:
    return type(value).__name__


def require_array(name: str, a) -> None:
    """``a`` is an array (NumPy, or CuPy on a GPU): anything else is a ``TypeError``."""
    if not (isinstance(a, np.ndarray) or isinstance(a, xp.ndarray)):
        raise TypeError(f"kv-canary: {name} must be an array, got {_type_name(a)}")


def int_arg(name: str, value, low: int = INT64_MIN, high: int = INT64_MAX) -> int:
    """``value`` as a Python int: an integer (not a bool) in ``[low, high]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"kv-canary: {name} must be an integer, got {_type_name(value)} {value!r}")
    v = int(value)
    if v < low or v > high:
        fail(f"kv-canary: {name} must be in [{low}, {high}], got {v}")
    return v


def flag_arg(name: str, value) -> bool:
    """``value`` as a bool: True/False (Python or NumPy) or the integers 0 and 1."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    raise TypeError(f"kv-canary: {name} must be True or False, got {_type_name(value)} {value!r}")


def checks_arg(checks) -> bool:
    """Whether the device-side value checks run: ``checks`` is ``"full"`` or ``"shapes"``."""
    if not isinstance(checks, str) or checks not in CHECK_MODES:
        fail(f"kv-canary: checks must be 'full' or 'shapes', got {checks!r}")
    return checks == "full"


def check_not_shared(fn_prefix: str, written, read=()) -> None:
    """No array in ``written`` shares bytes with another array of ``written`` or ``read`` (a kernel
    would read or write memory that it writes elsewhere); ``read`` arrays may share with each other.
    ``written`` and ``read`` are ``(name, array or None)`` pairs; one address lookup per array."""
    spans = []
    for is_written, group in ((True, written), (False, read)):
        for name, a in group:
            if a is not None:
                lo = a.data.ptr if type(a) is _DEVICE_ARRAY else data_address(a)
                spans.append((lo, lo + max(int(a.nbytes), 1), is_written, name))
    spans.sort(key=lambda span: span[0])
    for i, (lo, hi, is_written, name) in enumerate(spans):
        for lo2, _, is_written2, name2 in spans[i + 1:]:
            if lo2 >= hi:
                break
            if is_written or is_written2:
                first, second = (name, name2) if is_written else (name2, name)
                fail(f"kv-canary: {fn_prefix}{first} must not share memory with {second}")


def raise_first(verdict: list, messages: list) -> None:
    """Raise the message of the first condition a value check flagged.

    ``verdict[c] = (count, first)`` as ``device.check_flags`` returns it; ``messages[c](first)``
    builds condition ``c``'s text (``None``: condition unused).
    """
    for (count, first), message in zip(verdict, messages):
        if count and message is not None:
            fail(message(first))
