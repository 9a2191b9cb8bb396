"""The wide mutations: every array of a call (arguments and the fields of state, plan and context
objects), mutated in layout, aliasing and values, generated from the call itself.

* layout (``layout_mutations``): rows reversed and the last axis reversed (negative strides, the
  same values), row 0 broadcast over every row and element 0 over the last axis (zero strides,
  writable, as CuPy's ``broadcast_to`` is), rows that overlap (a row stride of one element), and
  rows padded with garbage (a row stride past the row's width, the same values);
* aliasing (``alias_mutations``): an array the call writes passed as another argument's buffer (the
  same bytes, reinterpreted when the dtypes differ) or overlapping its last bytes, and two read-only
  arguments of one dtype and shape passed as one buffer;
* values (``extreme_mutations``): one element at -1, 0, the dtype's extremes and at, below and past
  each bound the family names (the request rows, a row's width, a pool's items ...); NaN payloads in
  a pool's bytes.

Documented-invalid (must be rejected): an array the call writes that aliases another argument or
whose elements share memory (zero strides, overlapping rows). For the rest the judge (the NumPy
reference on host copies, where views and aliases are gone) decides whether an accepted call is
right.
"""

from __future__ import annotations

import numpy as np

from hisparse_numba import device

from .harness import Mutation, arrays_of, get, is_array, keep_root, put, to_device_value

xp = device.xp


def _module(v):
    """NumPy for host arrays (a mapped host pool on a GPU), CuPy (or the simulator's NumPy) else."""
    return np if isinstance(v, np.ndarray) else xp


def strided(base, shape, strides):
    """A writable view of ``base`` (C-contiguous; its dtype) with ``shape`` and byte ``strides``.
    Its root for the sweep's byte snapshot is ``base``."""
    view = _module(base).lib.stride_tricks.as_strided(base.reshape(-1), shape=tuple(shape),
                                                      strides=tuple(strides))
    return keep_root(view, base)


def _retyped(base, dtype, shape, offset: int = 0):
    """``base``'s bytes from byte ``offset`` seen as a C-contiguous ``dtype`` array of ``shape``."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return base.reshape(-1).view(np.uint8)[offset:offset + nbytes].view(dtype).reshape(shape)


def _same_values_reversed(v, axis):
    m = _module(v)
    return m.flip(m.flip(v, axis).copy(), axis)


def _broadcast(v, axis):
    """Element 0 of ``axis`` repeated along it (stride 0), writable."""
    m = _module(v)
    base = m.ascontiguousarray(v)
    strides = list(base.strides)
    strides[axis] = 0
    return strided(base, v.shape, strides)


def _overlapping_rows(v):
    """Row ``r`` starts one element after row ``r - 1``: rows share all but one element."""
    m = _module(v)
    inner = int(np.prod(v.shape[1:], dtype=np.int64))
    flat = m.ascontiguousarray(v).reshape(-1)[:v.shape[0] - 1 + inner].copy()
    item = v.dtype.itemsize
    inner_strides = [int(np.prod(v.shape[i + 1:], dtype=np.int64)) * item for i in range(1, v.ndim)]
    return strided(flat, v.shape, [item, *inner_strides])


def _padded_rows(v, garbage):
    """The same values, each row followed by garbage (row stride past the row's width)."""
    m = _module(v)
    pad = m.full(v.shape, garbage, dtype=v.dtype) if v.dtype.kind in "iu" else m.zeros_like(v)
    return m.concatenate([v, pad], axis=-1)[..., :v.shape[-1]]


def layout_mutations(path: str, a, written: bool = False, names: tuple = ()) -> list[Mutation]:
    """Strides of one array: negative, zero, overlapping and padded (the values kept where the
    layout allows). An array the call writes whose elements share memory must be rejected."""
    out = []

    def m(label, fn, shared=False):
        out.append(Mutation(f"{path}: {label}", path, _apply(path, fn), shared and written, names, "layout"))

    if a.ndim >= 1 and a.shape[0] > 1:
        m("rows reversed in memory (negative stride, same values)", lambda v: _same_values_reversed(v, 0))
        m("row 0 broadcast over every row (stride 0)", lambda v: _broadcast(v, 0), shared=True)
        if a.ndim >= 2:
            m("rows overlap (row stride of one element)", _overlapping_rows, shared=True)
    if a.ndim >= 2 and a.shape[-1] > 1:
        m("last axis reversed in memory (negative stride, same values)",
          lambda v: _same_values_reversed(v, v.ndim - 1))
        m("element 0 broadcast along the last axis (stride 0)", lambda v: _broadcast(v, v.ndim - 1),
          shared=True)
    if a.ndim >= 2:
        m("rows padded with garbage (row stride past the width, same values)",
          lambda v: _padded_rows(v, -7 if v.dtype.kind == "i" else 7))
    return out


def _apply(path, fn):
    def apply(call):
        put(call, path, fn(get(call, path)))
    return apply


def _extremes(dtype) -> list:
    info = np.iinfo(dtype)
    values = [-1, 0, 1, int(info.max), int(info.min)]
    if info.bits == 64:
        values += [2 ** 31 - 1, 2 ** 31, -2 ** 31]
    if info.bits == 32:
        values += [2 ** 15, 2 ** 16]
    return values


def extreme_mutations(path: str, a, bounds=(), *, index=0, names: tuple = ()) -> list[Mutation]:
    """Element ``index`` (flat) of an integer array at -1, 0, 1, the dtype's extremes and each
    bound ``b`` at ``b - 1``, ``b`` and ``b + 1`` (values the dtype cannot hold are left out)."""
    if a.dtype.kind not in "iu" or a.size == 0:
        return []
    info = np.iinfo(a.dtype)
    values = _extremes(a.dtype) + [x for b in bounds for x in (int(b) - 1, int(b), int(b) + 1)]
    out, seen = [], set()
    for x in values:
        if x in seen or not info.min <= x <= info.max:
            continue
        seen.add(x)
        where = "element 0" if index == 0 else "the last element"
        out.append(Mutation(f"{path}: {where} = {x}", path, _set_element(path, index % a.size, x),
                            False, names, "value"))
    return out


def _set_element(path, index, x):
    def apply(call):
        v = device.to_host(get(call, path))
        v.reshape(-1)[index] = x
        put(call, path, to_device_value(path.split(".")[-1], v))
    return apply


def nan_mutations(path: str, a) -> list[Mutation]:
    """A byte pool whose items hold NaNs (quiet, signalling, with payloads) and infinities: a copy
    must move the bytes, not the float values."""
    if a.nbytes < 16 or a.nbytes % 8:
        return []
    patterns = np.array([0x7FF8000000000001, 0x7FF0000000000001, 0xFFF8DEADBEEF0000,
                         0x7FF0000000000000], dtype=np.uint64)

    def fn(v):
        host = device.to_host(v)
        words = host.reshape(-1).view(np.uint8).view(np.uint64)
        words[::3] = patterns[np.arange(words[::3].size) % patterns.size]
        return host

    def apply(call):
        put(call, path, to_device_value(path.split(".")[-1], fn(get(call, path))))
    return [Mutation(f"{path}: NaN and inf payloads in the bytes", path, apply, False, (), "value")]


def dtype_mutations(path: str, a, pool: bool) -> list[Mutation]:
    """Dtypes no argument takes (bool, int8, float16, datetime64) and, for a byte pool, any dtype
    whose bytes are still items (complex, datetime) or that has no bytes to copy (object): judged,
    so an accepted one must equal the reference. datetime64 and object in the simulator only."""
    host = xp is np             # CuPy has neither datetime64 nor object arrays
    kinds = [np.bool_, np.int8, np.float16] + (["datetime64[ns]"] if host else [])
    if pool:
        kinds += [np.complex64] + ([object] if host else [])
    out = []
    for d in kinds:
        def fn(v, d=d):
            if pool and np.dtype(d) != object:   # the same bytes, seen as d
                return _retyped(_module(v).ascontiguousarray(v), d, (v.nbytes // np.dtype(d).itemsize,))
            return _module(v).asarray(device.to_host(v).astype(d)) if np.dtype(d) != object \
                else device.to_host(v).astype(object)
        out.append(Mutation(f"{path}: dtype {np.dtype(d).name}", path, _apply(path, fn), False, (), "value"))
    return out


# ---------------------------------------------------------------------------------------------
# Aliasing.

def _alias_into(written_path, other_path, overlap_only: bool):
    """``written_path`` becomes a view of ``other_path``'s bytes (reinterpreted), or the two become
    views of one new buffer that overlap in 16 bytes; values are kept where they fit."""
    def apply(call):
        w, o = get(call, written_path), get(call, other_path)
        m = _module(o)
        wn, on = int(w.nbytes), int(o.nbytes)
        if wn == 0 or on == 0:
            raise ValueError("an empty array cannot alias")
        if not overlap_only and on >= wn:
            base = m.ascontiguousarray(o)
            put(call, other_path, base)
            put(call, written_path, _retyped(base, w.dtype, w.shape))
            return
        start = max(((on - 16) // 16) * 16, 0) if overlap_only else 0
        buf = m.zeros(max(start + wn, on) + 16, dtype=np.uint8)
        buf[:on] = m.ascontiguousarray(o).reshape(-1).view(np.uint8)
        buf[start:start + wn] = m.asarray(np.ascontiguousarray(device.to_host(w)).reshape(-1).view(np.uint8))
        put(call, other_path, _retyped(buf, o.dtype, o.shape))
        put(call, written_path, _retyped(buf, w.dtype, w.shape, start))
    return apply


def alias_mutations(arrays: dict, written, read_pairs: bool = True) -> list[Mutation]:
    """Every written array as (and overlapping) every other array; read-only arrays of one dtype
    and shape passed as one buffer (fine unless the reference disagrees)."""
    out = []
    for w in written:
        if w not in arrays:
            continue
        for other in arrays:
            if other == w:
                continue
            names = (other,)
            out.append(Mutation(f"{w}: shares {other}'s buffer", w, _alias_into(w, other, False),
                                True, names, "alias"))
            out.append(Mutation(f"{w}: overlaps the end of {other}", w, _alias_into(w, other, True),
                                True, names, "alias"))
    if read_pairs:
        read = [p for p in arrays if p not in written]
        for i, p in enumerate(read):
            for q in read[i + 1:]:
                a, b = arrays[p], arrays[q]
                if a.dtype == b.dtype and a.shape == b.shape and a.size > 0:
                    out.append(Mutation(f"{q}: the buffer of {p} (read-only, fine)", q,
                                        lambda c, p=p, q=q: put(c, q, get(c, p)), False, (p,), "alias"))
    return out


# ---------------------------------------------------------------------------------------------
# Everything for one call.

def wide_mutations(call: dict, *, written, bounds: dict | None = None, pools=(), skip=()) -> list[Mutation]:
    """Layout, value and aliasing mutations of every array in ``call`` (fields of NamedTuples and
    dataclasses too). ``written``: paths of the arrays the call writes; ``bounds``: path -> the
    bounds its values are checked against; ``pools``: byte pools (their layout is fixed: C-contiguous
    by contract; they get NaN payloads instead of value extremes); ``skip``: paths left alone."""
    bounds = bounds or {}
    arrays = {p: a for p, a in arrays_of(call) if "[" not in p and p not in skip and is_array(a)}
    out = []
    for path, a in arrays.items():
        out += dtype_mutations(path, a, path in pools)
        if path in pools:
            out += nan_mutations(path, a)
            continue
        out += layout_mutations(path, a, written=path in written)
        out += extreme_mutations(path, a, bounds.get(path, ()))
        if a.size > 1:
            out += extreme_mutations(path, a, bounds.get(path, ()), index=a.size - 1)
    out += alias_mutations(arrays, written)
    return out
