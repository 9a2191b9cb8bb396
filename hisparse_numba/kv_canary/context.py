"""What the write and verify launches share: the launch context, real-KV sources and the ring.

* ``VerifyOrWriteContext``: the canary buffer ``[num_slots, stride_bytes]`` uint8 (stride >= 32, a
  multiple of 8; row ``s`` holds the four int64 fields of KV slot ``s``), the launch tag, the
  violation ring ``[ring_cap, 8]`` int64 with its ``violation_write_index [1]`` int32, the counters
  ``slot_run_counter [1]`` / ``kernel_run_counter [1]`` int64, up to four ``RealKvSource`` and the
  ``RealKvHashMode``, and the ``enable_chain_position_assert [1]`` int32 device flag.
* real-KV fold of slot ``s``: per source, the bytes ``tensor[s // page_size,
  (s % page_size) * num_bytes_per_token :][:n]`` (``n = 16`` in PARTIAL, ``read_bytes`` in ALL) as
  little-endian 8-byte words, ``acc = H(acc ^ word)`` from 0; sources combine as
  ``acc = H(acc ^ source_hash)`` from 0; mode NONE or no source gives 0.
* violation ring: a violation reserves row ``seq = atomic_add(violation_write_index, 1)`` and writes
  its 8 fields only when ``0 <= seq < ring_cap``; the index keeps counting past the capacity (and
  wraps as an int32 would).

Ring order: on the GPU, concurrent threads reserve rows in an order that is a race (sglang's too),
so only the multiset of rows is defined. The NumPy references append in entry order; tests compare
the ring rows ``[before, after)`` as a sorted multiset, and after an overflow only the index (and
that the kept rows are among the reference's). Counters and the canary buffer must match exactly.

The behaviour: ``docs/kv-canary-behaviour.md#real-kv-fingerprint`` and
``docs/kv-canary-behaviour.md#violation-ring``.
Lessons: 12 (capacity and SWA), 13 (capstone).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .. import device
from ..arguments import derived_argument, int64_view
from ..checks import (CANARY_PREFIX, check_array, check_flag, check_int, check_no_overlap, check_plain_data,
                      describe, fail, require_array)
from ..device import cuda, xp
from .hashing import (
    MAX_REAL_KV_SOURCES,
    VIOLATION_FIELDS,
    CanaryLaunchTag,
    RealKvHashMode,
    splitmix64,
    splitmix64_dev,
)

PARTIAL_READ_BYTES = 16


def _byte_rows(tensor):
    """``tensor`` (C-contiguous, >= 2-D) seen as ``[rows, row_bytes]``."""
    rows = int(tensor.shape[0])
    row_bytes = int(np.prod(tensor.shape[1:], dtype=np.int64)) * np.dtype(tensor.dtype).itemsize
    return rows, row_bytes


@dataclass(frozen=True)
class RealKvSource:
    """One piece of real KV folded into ``real_kv_hash``.

    Slot ``s`` reads row ``s // page_size``, bytes from ``(s % page_size) * num_bytes_per_token``.
    ``tensor``: a C-contiguous array of any dtype, >= 2-D (the bytes of dims 1.. form a row), base
    address 16-byte aligned. ``num_bytes_per_token`` and ``read_bytes`` are positive multiples of 16,
    ``read_bytes <= num_bytes_per_token``; the row must hold ``page_size * num_bytes_per_token``
    bytes (its size is a multiple of 16 bytes).
    """

    tensor: object
    page_size: int
    num_bytes_per_token: int
    read_bytes: int

    def __post_init__(self):
        require_array("RealKvSource.tensor", self.tensor, prefix=CANARY_PREFIX)
        check_plain_data("RealKvSource.tensor", self.tensor, prefix=CANARY_PREFIX)
        check_int("RealKvSource.page_size", self.page_size, prefix=CANARY_PREFIX)
        check_int("RealKvSource.num_bytes_per_token", self.num_bytes_per_token, prefix=CANARY_PREFIX)
        check_int("RealKvSource.read_bytes", self.read_bytes, prefix=CANARY_PREFIX)
        if self.page_size < 1:
            fail(f"kv-canary: RealKvSource.page_size must be >= 1, got {self.page_size}")
        if self.num_bytes_per_token <= 0 or self.num_bytes_per_token % 16:
            fail("kv-canary: RealKvSource.num_bytes_per_token must be a positive multiple of 16, "
                 f"got {self.num_bytes_per_token}")
        if self.read_bytes <= 0 or self.read_bytes > self.num_bytes_per_token or self.read_bytes % 16:
            fail("kv-canary: RealKvSource.read_bytes must be a positive multiple of 16 in "
                 f"(0, num_bytes_per_token={self.num_bytes_per_token}], got {self.read_bytes}")
        t = self.tensor
        if t.ndim < 2:
            fail(f"kv-canary: RealKvSource.tensor must be at least 2-D, got shape {tuple(t.shape)}")
        if t.shape[0] == 0:
            fail(f"kv-canary: RealKvSource.tensor must have at least one row, got shape {tuple(t.shape)}")
        if not t.flags.c_contiguous:
            fail(f"kv-canary: RealKvSource.tensor must be C-contiguous, got strides {tuple(t.strides)} bytes")
        _, row_bytes = _byte_rows(t)
        if row_bytes % 16:
            fail(f"kv-canary: RealKvSource.tensor row stride must be a multiple of 16 bytes, got "
                 f"{row_bytes} bytes (shape={tuple(t.shape)}, dtype={np.dtype(t.dtype).name})")
        if device.data_address(t) % 16:
            fail("kv-canary: RealKvSource.tensor base address must be a multiple of 16 bytes")
        need = self.page_size * self.num_bytes_per_token
        if row_bytes < need:
            fail("kv-canary: RealKvSource row is too narrow for its slot layout: dim-1 is "
                 f"{row_bytes} bytes but page_size={self.page_size} x "
                 f"num_bytes_per_token={self.num_bytes_per_token} needs {need}")


@dataclass(frozen=True)
class VerifyOrWriteContext:
    """Everything one write or verify launch shares (see the module docstring for shapes)."""

    canary_buf: object
    kernel_kind: int
    violation_ring: object
    violation_write_index: object
    slot_run_counter: object
    kernel_run_counter: object
    real_kv_sources: tuple = ()
    real_kv_hash_mode: int = RealKvHashMode.NONE
    enable_chain_position_assert: object = None

    @classmethod
    def allocate(cls, num_slots: int, *, kernel_kind=CanaryLaunchTag.HEAD_K_FULL, ring_capacity=64,
                 slot_stride_bytes=32, real_kv_sources=(), real_kv_hash_mode=RealKvHashMode.NONE,
                 chain_position_assert=False, array_module=None) -> "VerifyOrWriteContext":
        """A zeroed context (canary buffer, ring and counters) on the device, or host with numpy."""
        am = xp if array_module is None else array_module
        num_slots = check_int("num_slots", num_slots, 1, prefix=CANARY_PREFIX)
        ring_capacity = check_int("ring_capacity", ring_capacity, 1, prefix=CANARY_PREFIX)
        slot_stride_bytes = check_int("slot_stride_bytes", slot_stride_bytes, 32, prefix=CANARY_PREFIX)
        if slot_stride_bytes % 8:
            fail(f"kv-canary: slot_stride_bytes must be a multiple of 8, got {slot_stride_bytes}")
        kernel_kind = check_int("kernel_kind", kernel_kind, prefix=CANARY_PREFIX)
        real_kv_hash_mode = _hash_mode(check_int("real_kv_hash_mode", real_kv_hash_mode, prefix=CANARY_PREFIX))
        chain_position_assert = check_flag("chain_position_assert", chain_position_assert, prefix=CANARY_PREFIX)
        if not isinstance(real_kv_sources, (tuple, list)):
            raise TypeError(f"kv-canary: real_kv_sources must be a tuple of RealKvSource, got "
                            f"{type(real_kv_sources).__name__}")
        flag = am.zeros(1, dtype=np.int32)
        flag[...] = int(bool(chain_position_assert))
        return cls(
            canary_buf=am.zeros((num_slots, slot_stride_bytes), dtype=np.uint8),
            kernel_kind=int(kernel_kind),
            violation_ring=am.zeros((ring_capacity, VIOLATION_FIELDS), dtype=np.int64),
            violation_write_index=am.zeros(1, dtype=np.int32),
            slot_run_counter=am.zeros(1, dtype=np.int64),
            kernel_run_counter=am.zeros(1, dtype=np.int64),
            real_kv_sources=tuple(real_kv_sources),
            real_kv_hash_mode=int(real_kv_hash_mode),
            enable_chain_position_assert=flag,
        )

    def state_arrays(self) -> dict:
        """The arrays a launch mutates (plus the flag), by name."""
        return {"canary_buf": self.canary_buf, "violation_ring": self.violation_ring,
                "violation_write_index": self.violation_write_index,
                "slot_run_counter": self.slot_run_counter, "kernel_run_counter": self.kernel_run_counter}


def _hash_mode(mode: int) -> int:
    if mode not in (0, 1, 2):
        fail(f"kv-canary: real_kv_hash_mode must be 0 (NONE), 1 (PARTIAL) or 2 (ALL), got {mode}")
    return mode


def check_plan_arrays(plan, plan_type, first: str, *, type_message: str) -> int:
    """``plan`` is a ``plan_type`` (else ``TypeError(type_message)``) whose fields are all arrays,
    ``plan.<first>`` a 1-D int64 one; returns the length of that first array."""
    if not isinstance(plan, plan_type):
        raise TypeError(type_message)
    for name, a in plan.arrays().items():
        require_array(f"plan.{name}", a, prefix=CANARY_PREFIX)
    a = getattr(plan, first)
    check_array(f"plan.{first}", a, np.int64, ndim=1, prefix=CANARY_PREFIX)
    return int(a.shape[0])


def check_context(ctx: VerifyOrWriteContext) -> None:
    """Checks shared by the write and verify launchers and references (host only: types, scalars,
    shapes, and that every real-KV source covers every canary slot)."""
    if not isinstance(ctx, VerifyOrWriteContext):
        raise TypeError(f"kv-canary: context must be a VerifyOrWriteContext, got {type(ctx).__name__}")
    check_int("context.kernel_kind", ctx.kernel_kind, prefix=CANARY_PREFIX)
    mode = _hash_mode(check_int("context.real_kv_hash_mode", ctx.real_kv_hash_mode, prefix=CANARY_PREFIX))
    if not isinstance(ctx.real_kv_sources, (tuple, list)):
        raise TypeError(f"kv-canary: real_kv_sources must be a tuple of RealKvSource, got "
                        f"{type(ctx.real_kv_sources).__name__}")
    if len(ctx.real_kv_sources) > MAX_REAL_KV_SOURCES:
        fail(f"kv-canary: at most {MAX_REAL_KV_SOURCES} RealKvSource entries supported by the CUDA ABI, "
             f"got {len(ctx.real_kv_sources)}")
    for i, src in enumerate(ctx.real_kv_sources):
        if not isinstance(src, RealKvSource):
            fail(f"kv-canary: real_kv_sources[{i}] must be a RealKvSource, got {type(src).__name__}")
    for name, a in ctx.state_arrays().items():
        require_array(name, a, prefix=CANARY_PREFIX)
    buf = ctx.canary_buf
    check_array("canary_buf", buf, np.uint8, ndim=2, prefix=CANARY_PREFIX)
    if buf.shape[1] < 32:
        fail(f"kv-canary: canary_buf slot stride must hold at least 4 int64 fields, got {buf.shape[1] // 8}")
    if buf.shape[1] % 8 or device.data_address(buf) % 8:
        fail(f"kv-canary: canary_buf rows must be whole int64 fields (stride and base multiples of 8 "
             f"bytes), got {describe(buf)}")
    ring = ctx.violation_ring
    check_array("violation_ring", ring, np.int64, ndim=2, prefix=CANARY_PREFIX)
    if ring.shape[1] != VIOLATION_FIELDS:
        fail(f"kv-canary: violation_ring must have shape [ring_capacity, {VIOLATION_FIELDS}], got {describe(ring)}")
    check_array("violation_write_index", ctx.violation_write_index, np.int32, shape=(1,), prefix=CANARY_PREFIX)
    check_array("slot_run_counter", ctx.slot_run_counter, np.int64, shape=(1,), prefix=CANARY_PREFIX)
    check_array("kernel_run_counter", ctx.kernel_run_counter, np.int64, shape=(1,), prefix=CANARY_PREFIX)
    if ctx.enable_chain_position_assert is not None:
        require_array("enable_chain_position_assert", ctx.enable_chain_position_assert, prefix=CANARY_PREFIX)
        check_array("enable_chain_position_assert", ctx.enable_chain_position_assert, np.int32, shape=(1,), prefix=CANARY_PREFIX)
    num_slots = int(buf.shape[0])
    if mode != RealKvHashMode.NONE:
        for i, src in enumerate(ctx.real_kv_sources):
            covered = int(src.tensor.shape[0]) * int(src.page_size)
            if covered < num_slots:
                fail(f"kv-canary: real_kv_sources[{i}] covers {covered} slots ({src.tensor.shape[0]} rows "
                     f"x page_size={src.page_size}), fewer than canary_buf's {num_slots} slots")


def check_launch_memory(ctx: VerifyOrWriteContext, read) -> None:
    """No array a write or verify launch writes (the context's state) shares memory with another
    state array, the flag, a real-KV source or the arrays of ``read`` (name -> array)."""
    read = {**read, "enable_chain_position_assert": ctx.enable_chain_position_assert}
    read.update((f"real_kv_sources[{i}].tensor", s.tensor) for i, s in enumerate(ctx.real_kv_sources))
    check_no_overlap(ctx.state_arrays(), read, CANARY_PREFIX)


# ---------------------------------------------------------------------------------------------
# References.


def canary_fields(canary_buf) -> np.ndarray:
    """The canary buffer as ``[num_slots, stride // 8]`` int64 (a view, made once per buffer)."""
    return derived_argument("int64", canary_buf, int64_view)


def _read_bytes(src: RealKvSource, mode: int) -> int:
    return PARTIAL_READ_BYTES if mode == RealKvHashMode.PARTIAL else src.read_bytes


def fold_real_kv_reference(ctx: VerifyOrWriteContext, slot: int, sources=None) -> int:
    """The real-KV fingerprint of ``slot`` as a Python int in [0, 2**64). ``sources``: host copies."""
    mode = int(ctx.real_kv_hash_mode)
    if mode == RealKvHashMode.NONE or not ctx.real_kv_sources:
        return 0
    acc = 0
    for src, host in zip(ctx.real_kv_sources, sources or [device.to_host(s.tensor) for s in ctx.real_kv_sources]):
        rows, row_bytes = _byte_rows(host)
        u8 = np.ascontiguousarray(host).view(np.uint8).reshape(rows, row_bytes)
        col = (slot % src.page_size) * src.num_bytes_per_token
        words = u8[slot // src.page_size, col:col + _read_bytes(src, mode)].view("<u8")
        h = 0
        for w in words:
            h = splitmix64(h ^ int(w))
        acc = splitmix64(acc ^ h)
    return acc


def host_sources(ctx: VerifyOrWriteContext) -> list:
    return [device.to_host(s.tensor) for s in ctx.real_kv_sources]


def append_violations_reference(ctx: VerifyOrWriteContext, ring, write_index, rows: list) -> None:
    """Give ``rows`` the sequence numbers ``index, index + 1, ...`` (int32, wrapping as the device's
    atomic add does), store those inside ``[0, ring_capacity)``, and advance the index."""
    if not rows:
        return
    base = int(write_index[0])
    for j, row in enumerate(rows):
        seq = _wrap_int32(base + j)
        if 0 <= seq < ring.shape[0]:
            ring[seq] = np.array(row, dtype=np.int64)
    write_index[0] = _wrap_int32(base + len(rows))


def _wrap_int32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


# ---------------------------------------------------------------------------------------------
# Device side.


@functools.cache
def _no_source_arguments(backend: str):
    words = [xp.zeros(2, dtype=np.uint64) for _ in range(MAX_REAL_KV_SOURCES)]
    return words, xp.zeros((MAX_REAL_KV_SOURCES, 4), dtype=np.int64)


_SOURCE_ARGUMENTS_KEPT = 8
_source_arguments_cache: dict = {}


def source_arguments(ctx: VerifyOrWriteContext):
    """Kernel arguments for the real-KV fold: four uint64 word arrays, an int64 ``[4, 4]`` parameter
    table (page_size, words per token, words read, words per row) and the number of sources.

    The table is copied to the device once per combination of sources (keyed by their buffers'
    addresses and layouts) and kept for the last few combinations, so that a steady loop of calls
    makes no host-to-device copy. The cache holds the sources' tensors, so an address in a key
    cannot be reused by another buffer while its entry lives.
    """
    mode = int(ctx.real_kv_hash_mode)
    n = 0 if mode == RealKvHashMode.NONE else len(ctx.real_kv_sources)
    if n == 0:  # cached, so that a launch without sources makes no host-to-device copy
        words, params = _no_source_arguments(device.backend())
        return words, params, 0
    key = (mode, tuple((id(s.tensor), device.data_address(s.tensor), tuple(s.tensor.shape),
                        np.dtype(s.tensor.dtype).str, s.page_size, s.num_bytes_per_token, s.read_bytes)
                       for s in ctx.real_kv_sources))
    hit = _source_arguments_cache.get(key)
    if hit is not None:
        return hit[0], hit[1], n
    params = np.zeros((MAX_REAL_KV_SOURCES, 4), dtype=np.int64)
    words = []
    for i in range(MAX_REAL_KV_SOURCES):
        if i < n:
            src = ctx.real_kv_sources[i]
            _, row_bytes = _byte_rows(src.tensor)
            params[i] = (src.page_size, src.num_bytes_per_token // 8, _read_bytes(src, mode) // 8,
                         row_bytes // 8)
            words.append(device.byte_words(src.tensor))
        else:
            words.append(_no_source_arguments(device.backend())[0][i])
    if len(_source_arguments_cache) >= _SOURCE_ARGUMENTS_KEPT:
        _source_arguments_cache.pop(next(iter(_source_arguments_cache)))
    entry = (words, device.to_device(params), tuple(s.tensor for s in ctx.real_kv_sources))
    _source_arguments_cache[key] = entry
    return entry[0], entry[1], n


@cuda.jit(device=True, inline=True)
def _fold_source_dev(words, params, i, slot):
    page = params[i, 0]
    base = (slot // page) * params[i, 3] + (slot % page) * params[i, 1]
    h = np.uint64(0)
    w = 0
    while w < params[i, 2]:
        h = splitmix64_dev(h ^ words[base + w])
        w += 1
    return h


@cuda.jit(device=True, inline=True)
def fold_real_kv_dev(src0, src1, src2, src3, params, num_sources, slot):
    """The real-KV fingerprint of ``slot`` (uint64); 0 when ``num_sources == 0``."""
    acc = np.uint64(0)
    if num_sources > 0:
        acc = splitmix64_dev(acc ^ _fold_source_dev(src0, params, 0, slot))
    if num_sources > 1:
        acc = splitmix64_dev(acc ^ _fold_source_dev(src1, params, 1, slot))
    if num_sources > 2:
        acc = splitmix64_dev(acc ^ _fold_source_dev(src2, params, 2, slot))
    if num_sources > 3:
        acc = splitmix64_dev(acc ^ _fold_source_dev(src3, params, 3, slot))
    return acc


@cuda.jit(device=True, inline=True)
def record_violation_dev(ring, write_index, kind, slot, position, stored_token, expected_token,
                            stored_hash, expected_aux, bits):
    """Reserve a ring row with an atomic add; fill it when it is inside the ring."""
    seq = cuda.atomic.add(write_index, 0, 1)
    if seq >= 0 and seq < ring.shape[0]:  # a corrupted (negative) index writes nothing
        ring[seq, 0] = kind
        ring[seq, 1] = slot
        ring[seq, 2] = position
        ring[seq, 3] = stored_token
        ring[seq, 4] = expected_token
        ring[seq, 5] = stored_hash
        ring[seq, 6] = expected_aux
        ring[seq, 7] = bits
        cuda.threadfence_system()
