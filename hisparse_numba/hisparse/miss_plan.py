"""Sizing and allocating the speculative miss plan (the fix that lesson 01 teaches).

A speculative call resolves ``steps * top_k`` occurrences per request. In the worst case every
occurrence is a distinct token that is neither hot nor in the active tail, so a request can have
``steps * top_k`` unique misses, and the plan (one ``(src, dst)`` pair per unique miss, indexed by
its unique-miss number) needs that many columns per row. A single-step plan has only ``top_k``.
"""

from __future__ import annotations

import functools

from .. import device
from .limits import MAX_OCCURRENCES
from ..checks import check_int


def miss_plan_capacity(num_steps: int, num_top_k: int) -> int:
    """Columns a speculative miss plan needs per batch row: ``num_steps * num_top_k``
    (num_steps <= 4 and num_steps * num_top_k <= 8192, as the speculative launcher accepts;
    num_steps = 1 sizes a single-step plan, ``[batch, top_k]``)."""
    steps = check_int("num_steps", num_steps, 1, 4)
    return steps * check_int("num_top_k", num_top_k, 1, MAX_OCCURRENCES // steps)


def alloc_miss_plan(batch: int, num_steps: int, num_top_k: int):
    """``(miss_src, miss_dst, miss_count)`` for ``batch`` rows (count the CUDA-graph padding rows).

    miss_src ``[batch, steps * top_k]`` int64 and miss_dst ``[batch, steps * top_k]`` int32 (same
    row stride), both filled with -1 so that an unwritten entry is recognisable; miss_count
    ``[batch]`` int32 zeros. Device arrays.
    """
    xp = device.xp
    cap = miss_plan_capacity(num_steps, num_top_k)
    rows = check_int("batch", batch, 1)
    return (xp.full((rows, cap), -1, dtype=xp.int64),
            xp.full((rows, cap), -1, dtype=xp.int32),
            xp.zeros(rows, dtype=xp.int32))


@functools.cache
def placeholder_plan():
    """A ``[1, 1]`` plan and ``[1]`` count for kernels compiled to record no plan.

    Such kernels never touch them; they exist because a kernel's argument list is fixed.
    """
    xp = device.xp
    return (xp.full((1, 1), -1, dtype=xp.int64), xp.full((1, 1), -1, dtype=xp.int32),
            xp.zeros(1, dtype=xp.int32))
