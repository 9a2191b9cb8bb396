"""Kernel arguments derived from the caller's buffers, made once per buffer.

The speculative swap kernel and its value check take an int64 view of ``state.scratch_state``;
the kv-canary kernels an int64 view of the canary buffer. Building a view costs several array
operations on every call, and a new view object also defeats ``device.launch``'s reuse of the
previous argument list; ``derived_argument`` makes each view once per buffer.
"""

from __future__ import annotations

import numpy as np

from . import device

_derived: dict = {}


def address(a) -> int:
    """``device.data_address``, without building a CuPy array's interface dict on every call."""
    return a.data.ptr if device.xp is not np and type(a) is device.xp.ndarray else \
        device.data_address(a)


def int64_view(a):
    return a.view(np.int64)


def derived_argument(kind: str, a, make):
    """``make(a)``, made once per buffer: keyed by ``kind`` and the buffer's type, address, shape
    and strides. The eight newest are kept; each holds its buffer, so no other buffer can take
    that address while it is cached."""
    key = (kind, type(a), address(a), a.shape, a.strides)
    view = _derived.get(key)
    if view is None:
        if len(_derived) >= 8:
            _derived.pop(next(iter(_derived)))
        view = _derived[key] = make(a)
    return view
