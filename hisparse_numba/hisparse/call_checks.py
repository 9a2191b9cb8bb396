"""Checks every launcher of the single-step family runs on its arguments before anything else.

* Python types: an array argument must be an array (NumPy, CuPy or a ``host_cache_array``), an
  integer scalar a Python or NumPy integer (not a bool, float or string: ``16.5``, ``inf`` and
  ``'16'`` are rejected, not coerced), a flag a bool. A wrong Python type is a ``TypeError``
  naming the argument.
* Batch agreement: arrays that must have the same number of rows are compared together, so the
  one that disagrees with the others is the one the message blames.
* Overlap: an array the call writes must not share bytes with any other argument.
* Device-row claims (:func:`claim_epoch`): the value-check kernels prove that destination rows
  are distinct by claiming each row in a per-process int32 table, one entry per row of the
  destination pool, with this call's epoch number (``cuda.atomic.exch``): a row whose previous
  value is already this epoch is claimed twice. The table is allocated once per pool size and
  never cleared between calls, so a check costs no memset and no memory that grows with values.

The value checks themselves live beside each kernel (``gather_checks.py``, ``swap_in_checks.py``,
``planned_copy_checks.py``). Lessons: 00 (the hot buffer), 05 (plan dtypes).
"""

from __future__ import annotations

import numpy as np

from .. import device
from ..checks import data_address, describe, fail

CHECK_MODES = ("full", "shapes")


def check_mode(checks) -> bool:
    """``checks="full"`` (the default: value checks on the device) or ``"shapes"`` (shape and
    dtype checks only, for callers that validated the values upstream). True for "full"."""
    if not isinstance(checks, str) or checks not in CHECK_MODES:
        fail(f'checks must be "full" or "shapes", got {checks!r}')
    return checks == "full"


def check_int(name: str, value) -> int:
    """``value`` as an ``int``: a Python or NumPy integer, never a bool, float or string."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    return int(value)


def check_flag(name: str, value) -> bool:
    """``value`` as a ``bool``: True, False (or a NumPy bool, or the integers 0 and 1)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


_ARRAY_TYPES = (np.ndarray, device.xp.ndarray)


def is_array(a) -> bool:
    if type(a) in _ARRAY_TYPES:
        return True
    return all(hasattr(a, attr) for attr in ("dtype", "shape", "ndim", "strides", "nbytes")) and (
        hasattr(a, "__array_interface__") or hasattr(a, "__cuda_array_interface__"))


def check_array(name: str, a) -> None:
    if not is_array(a):
        raise TypeError(f"{name} must be an array (NumPy, CuPy or a host_cache_array), "
                        f"got {type(a).__name__}")


def agreed_rows(role: str, arrays: dict) -> int:
    """The common ``shape[0]`` of ``arrays`` (name -> array, each at least 1-D); when they
    disagree, the rows most of them have win and the message names the ones that differ."""
    rows = {name: int(a.shape[0]) for name, a in arrays.items()}
    counts = {}
    for n in rows.values():
        counts[n] = counts.get(n, 0) + 1
    first = next(iter(rows.values()))
    agreed = max(counts, key=lambda n: (counts[n], n == first))
    odd = [name for name, n in rows.items() if n != agreed]
    if odd:
        name = odd[0]
        others = ", ".join(k for k in rows if k not in odd)
        fail(f"{name} has {rows[name]} rows, but {others} have {agreed} (the {role}); got "
             f"{describe(arrays[name])}")
    return agreed


def _address(a) -> int:
    ptr = getattr(getattr(a, "data", None), "ptr", None)     # a CuPy array: no interface dict to build
    return int(ptr) if ptr is not None else data_address(a)


def _byte_span(a) -> tuple[int, int]:
    lo = hi = _address(a)
    for n, s in zip(a.shape, a.strides):
        if n == 0:
            return lo, lo
        if s >= 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi + np.dtype(a.dtype).itemsize


def check_no_overlap(written: dict, read: dict) -> None:
    """No array the call writes (``written``, name -> array) shares bytes with another argument."""
    spans = {name: _byte_span(a) for name, a in {**read, **written}.items() if a is not None}
    for w in written:
        if written[w] is None:
            continue
        lo, hi = spans[w]
        for other, (olo, ohi) in spans.items():
            if other != w and lo < ohi and olo < hi and hi > lo and ohi > olo:
                fail(f"{w} shares memory with {other}; the call writes {w}, so it must be a "
                     "buffer of its own")


_claims = {"table": None, "epoch": 0}


def claim_epoch(rows: int):
    """``(table, epoch)`` for one value check that claims destination rows ``0..rows-1``."""
    table = _claims["table"]
    if table is None or table.shape[0] < rows or _claims["epoch"] >= 2**31 - 2:
        table = _claims["table"] = device.xp.zeros(max(int(rows), 1), dtype=np.int32)
        _claims["epoch"] = 0
    _claims["epoch"] += 1
    return table, _claims["epoch"]
