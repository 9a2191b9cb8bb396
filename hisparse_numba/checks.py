"""Argument checks shared by every launcher and reference.

Each check raises ``ValueError`` and runs before anything is launched or written, so a
rejected call leaves every buffer of the caller byte-identical. Messages that sglang has
are kept verbatim (see ``hisparse_numba.errors``); the others name the argument, what it
is, and what was expected.
"""

from __future__ import annotations

import numpy as np

from .device import data_address

ALIGN_BYTES = 16
ALIGNMENT_MESSAGE = "The pointers must be multiple of 16 bytes."
CANARY_PREFIX = "kv-canary: "  # opens every kv-canary message, as in sglang


def fail(message: str) -> None:
    raise ValueError(message)


def describe(a) -> str:
    """``shape (2, 3) int32`` style description of an array argument."""
    return f"shape {tuple(a.shape)} {np.dtype(a.dtype).name}"


def row_stride(a) -> int:
    """Row stride of a 2-D (or higher) array in elements, as sglang's kernels index it."""
    return int(a.strides[0]) // int(np.dtype(a.dtype).itemsize)


def is_c_contiguous(a) -> bool:
    return bool(a.flags.c_contiguous)


def check_dtype(name: str, a, dtype) -> None:
    if np.dtype(a.dtype) != np.dtype(dtype):
        fail(f"{name} must have dtype {np.dtype(dtype).name}, got {describe(a)}")


def check_dtype_in(name: str, a, dtypes) -> None:
    if np.dtype(a.dtype) not in [np.dtype(d) for d in dtypes]:
        names = " or ".join(np.dtype(d).name for d in dtypes)
        fail(f"{name} must have dtype {names}, got {describe(a)}")


def check_ndim(name: str, a, ndim: int, layout: str) -> None:
    if a.ndim != ndim:
        fail(f"{name} must have shape {layout}, got {describe(a)}")


def check_canary_array(name: str, a, dtype, *, shape=None, ndim=None) -> None:
    """kv-canary's array check: ``dtype``, then ``ndim`` dimensions or exactly ``shape``, then
    C-contiguous; its messages open with ``kv-canary:`` as sglang's do."""
    if np.dtype(a.dtype) != np.dtype(dtype):
        fail(f"{CANARY_PREFIX}{name} must have dtype {np.dtype(dtype).name}, got {describe(a)}")
    if ndim is not None and a.ndim != ndim:
        fail(f"{CANARY_PREFIX}{name} must be {ndim}-D, got {describe(a)}")
    if shape is not None and tuple(a.shape) != tuple(shape):
        fail(f"{CANARY_PREFIX}{name} must have shape {tuple(shape)}, got {describe(a)}")
    if not a.flags.c_contiguous:
        fail(f"{CANARY_PREFIX}{name} must be contiguous")


def check_block_size(block_size) -> None:
    """A CUDA block of whole warps: a multiple of 32 in ``[32, 1024]``."""
    if int(block_size) < 32 or int(block_size) > 1024 or int(block_size) % 32:
        fail(f"block_size must be a multiple of 32 in [32, 1024], got {block_size}")


def check_inner_contiguous(name: str, a) -> None:
    """Rows must be dense: the last axis has element stride 1."""
    if a.shape[-1] > 1 and int(a.strides[-1]) != np.dtype(a.dtype).itemsize:
        fail(f"{name} rows must be contiguous (inner stride 1), got strides {tuple(a.strides)} bytes")


def check_item_copy(item_size_bytes: int, *buffers) -> None:
    """The vectorised item copy moves 16-byte chunks: item size and bases must be 16-aligned."""
    if int(item_size_bytes) <= 0 or int(item_size_bytes) % ALIGN_BYTES:
        fail(ALIGNMENT_MESSAGE)
    for buf in buffers:
        if data_address(buf) % ALIGN_BYTES:
            fail(ALIGNMENT_MESSAGE)


def check_item_buffer(name: str, buf, item_size_bytes: int, max_item: int) -> None:
    """``buf`` is a C-contiguous byte pool holding items ``0..max_item`` of the given size."""
    if not is_c_contiguous(buf):
        fail(f"{name} must be C-contiguous, got strides {tuple(buf.strides)} bytes")
    need = (int(max_item) + 1) * int(item_size_bytes)
    if max_item >= 0 and buf.nbytes < need:
        fail(
            f"{name} holds {buf.nbytes} bytes, but item {int(max_item)} of "
            f"{int(item_size_bytes)} bytes needs {need}"
        )


def check_miss_plan(miss_src, miss_dst, miss_count, *, batch: int, capacity: int,
                    shape_message: str, count_message: str) -> bool:
    """The miss-plan checks, in sglang's order. Returns whether a plan is recorded.

    ``shape_message`` and ``count_message`` are the launcher's texts for a plan that is too
    small (not 2-D, fewer than ``batch`` rows or fewer than ``capacity`` columns) and for a
    count that is not 1-D with at least ``batch`` entries.
    """
    given = [x is not None for x in (miss_src, miss_dst, miss_count)]
    if not any(given):
        return False
    if not all(given):
        fail("miss_src, miss_dst, and miss_count must be provided together.")
    if np.dtype(miss_src.dtype) != np.int64 or np.dtype(miss_dst.dtype) != np.int32:
        fail("miss_src must be int64 and miss_dst must be int32.")
    if np.dtype(miss_count.dtype) != np.int32:
        fail("miss_count must be int32.")
    for plan in (miss_src, miss_dst):
        if plan.ndim != 2 or plan.shape[0] < batch or plan.shape[1] < capacity:
            fail(shape_message)
    if miss_count.ndim != 1 or miss_count.shape[0] < batch:
        fail(count_message)
    if row_stride(miss_src) != row_stride(miss_dst):
        fail("miss_src/miss_dst row strides must match.")
    # Not checked by sglang; a strided row would scatter the plan over other rows.
    check_inner_contiguous("miss_src", miss_src)
    check_inner_contiguous("miss_dst", miss_dst)
    if miss_src.shape[0] > 1 and row_stride(miss_src) < capacity:
        fail(f"miss_src/miss_dst rows overlap: row stride {row_stride(miss_src)} elements is less than "
             f"the {capacity} entries a row may hold (a flat or reshaped buffer); allocate "
             "[batch, capacity] rows")
    return True
