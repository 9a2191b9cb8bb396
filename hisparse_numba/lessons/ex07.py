"""Lesson 07 (miss_src/miss_dst row strides): sglang's plan addressing and the exercise checker."""

from __future__ import annotations


from .. import device
from ..checks import row_stride
from ..device import cuda
from .ex05 import _report


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


def check_strides_match(strides_match) -> bool:
    """Exercise 07: ``strides_match(miss_src, miss_dst)`` says whether the two plan arrays step
    through rows alike, as the kernels need it (row strides compared in elements)."""
    xp = device.xp
    b, k = 3, 8
    cases = [
        ((xp.zeros((b, k), xp.int64), xp.zeros((b, k), xp.int32)), True),
        ((xp.zeros((b, k), xp.int64), xp.zeros((b, 2 * k), xp.int32)[:, :k]), False),  # equal bytes
        ((xp.zeros((b, 2 * k), xp.int64)[:, :k], xp.zeros((b, 2 * k), xp.int32)[:, :k]), True),
        ((xp.zeros((b, 2 * k), xp.int64)[:, :k], xp.zeros((b, k), xp.int32)), False),
        ((xp.zeros((b, k), xp.int64), xp.zeros((b, k // 2), xp.int32)), False),
    ]
    for (src, dst), expected in cases:
        try:
            answer = bool(strides_match(src, dst))
        except Exception as e:
            return _report(False, "", f"{type(e).__name__}: {e}")
        if answer != expected:
            return _report(False, "", f"for miss_src {tuple(src.shape)} strides {src.strides} and miss_dst "
                           f"{tuple(dst.shape)} strides {dst.strides} (bytes) the answer is {expected}")
    return _report(True, "row strides compared in elements, not bytes", "")
