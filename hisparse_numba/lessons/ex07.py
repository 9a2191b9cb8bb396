"""Lesson 07 (miss_src/miss_dst row strides): sglang's plan addressing, the exercise checker and
the lesson's figure."""

from __future__ import annotations

import numpy as np

from .. import device
from ..device import cuda
from .common import checker, draw_grid, figure, learner_answer, report, show, wrong


@cuda.jit
def _write_with_one_stride(src_words, dst_words, stride, plan_src, plan_dst, counts):
    b = cuda.blockIdx.x
    m = cuda.threadIdx.x
    while m < counts[b]:
        src_words[b * stride + m] = plan_src[b, m]
        dst_words[b * stride + m] = plan_dst[b, m]
        m += cuda.blockDim.x


def write_like_sglang(src_buffer, dst_buffer, stride, plan):
    """Write a plan's live entries the way sglang's kernel addresses the plan: two base pointers
    (the first element of ``src_buffer`` / ``dst_buffer``, C-contiguous pools) and ONE row stride,
    ``stride`` elements (``miss_src``'s), for both. ``plan``: NumPy ``miss_src``/``miss_dst``/
    ``miss_count`` holding the entries to write."""
    batch = int(plan["miss_count"].shape[0])
    device.launch(_write_with_one_stride, batch, 32, src_buffer.reshape(-1), dst_buffer.reshape(-1),
                  int(stride), device.to_device(plan["miss_src"]), device.to_device(plan["miss_dst"]),
                  device.to_device(plan["miss_count"]))
    device.synchronize()


def _cases():
    xp = device.xp
    b, k = 3, 8
    return [
        ((xp.zeros((b, k), xp.int64), xp.zeros((b, k), xp.int32)), True),
        ((xp.zeros((b, k), xp.int64), xp.zeros((b, 2 * k), xp.int32)[:, :k]), False),  # equal bytes
        ((xp.zeros((b, 2 * k), xp.int64)[:, :k], xp.zeros((b, 2 * k), xp.int32)[:, :k]), True),
        ((xp.zeros((b, 2 * k), xp.int64)[:, :k], xp.zeros((b, k), xp.int32)), False),
        ((xp.zeros((b, k), xp.int64), xp.zeros((b, k // 2), xp.int32)), False),
    ]


@checker
def check_strides_match(strides_match) -> bool:
    """Exercise 07-a: ``strides_match(miss_src, miss_dst)`` says whether the two plan arrays step
    through rows alike, as the kernels need it (row strides compared in elements)."""
    for (src, dst), expected in _cases():
        answer = learner_answer(strides_match, src, dst)
        if not isinstance(answer, (bool, np.bool_)):
            wrong(f"strides_match returned {answer!r}; it must return True or False")
        if bool(answer) != expected:
            same_bytes = src.strides[0] == dst.strides[0]
            hint = (" (equal byte strides: an int64 row of 8 and an int32 row of 16 both span 64 bytes, "
                    "yet the kernel steps both by the same number of elements)") if same_bytes else \
                   " (.strides is in bytes: divide by .itemsize to compare elements)"
            wrong(f"for miss_src {tuple(src.shape)} strides {src.strides} and miss_dst {tuple(dst.shape)} "
                  f"strides {dst.strides} (bytes) the answer is {expected}{hint}")
    return report(True, "row strides compared in elements, not bytes", "")


def draw_strides(src_stride_elems: int, dst_stride_elems: int, src_item: int = 8, dst_item: int = 4,
                 rows: int = 3) -> None:
    """Where row ``b`` starts in each plan array, in elements and in bytes."""
    fig, axes = figure(8, 2.6, nrows=2)
    for ax, unit in zip(axes, ("elements", "bytes")):
        s = [b * src_stride_elems * (src_item if unit == "bytes" else 1) for b in range(rows)]
        d = [b * dst_stride_elems * (dst_item if unit == "bytes" else 1) for b in range(rows)]
        draw_grid(ax, np.array([s, d]), colors=np.array([[1] * rows, [3 if s == d else 2] * rows]),
                  row_labels=["miss_src", "miss_dst"], col_labels=[f"row {b}" for b in range(rows)],
                  title=f"start of each row, in {unit}" + (" (what one kernel stride must match)"
                                                           if unit == "elements" else ""))
    show(fig)
