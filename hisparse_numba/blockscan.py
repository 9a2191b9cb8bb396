"""Block-wide exclusive prefix sum: the ranking step of every kernel here.

Kernels rank things deterministically (misses in lane order, hit and evictable slots in LRU
order, unique misses by first occurrence, plan offsets by row) where sglang uses warp ballots or
lets atomics race. Two implementations give the same sums:

* on a GPU (and when compiling for one), warp shuffles: each warp scans its 32 values, warp 0
  scans the warp totals. Three barriers, where Hillis-Steele needs 21 for 1024 threads; the
  barriers are what a scan costs, and the fused speculative kernel runs several before its copies.
* in the CUDA simulator, which has no warp intrinsics, and for blocks that are not whole warps:
  Hillis-Steele over shared memory with ``syncthreads``.
"""

import numpy as np

from . import device
from .device import cuda

WARP_SHUFFLES = not device.SIMULATOR     # a compile-time constant inside the kernels
FULL_MASK = 0xFFFFFFFF


@cuda.jit(device=True, inline=True)
def warp_inclusive_scan_dev(value, lane):
    """Inclusive prefix of ``value`` over lanes ``0..lane`` of a full warp (GPU only)."""
    x = value
    d = 1
    while d < 32:
        y = cuda.shfl_up_sync(FULL_MASK, x, d)
        if lane >= d:
            x += y
        d *= 2
    return x


@cuda.jit(device=True, inline=True)
def block_exclusive_scan_dev(s_scan, value, tid, num_threads):
    """(exclusive prefix of ``value`` over threads ``0..tid-1``, block total), both int64.

    Every thread of the block calls it. ``s_scan`` is a shared array of at least
    ``num_threads`` entries of ``value``'s type. Ends with a barrier, so ``s_scan`` may be
    reused right away.
    """
    if WARP_SHUFFLES and num_threads % 32 == 0:
        lane = tid % 32
        warp = tid // 32
        warps = num_threads // 32
        inclusive = warp_inclusive_scan_dev(np.int64(value), lane)
        if lane == 31:
            s_scan[warp] = inclusive
        cuda.syncthreads()
        if warp == 0:
            w = np.int64(0)
            if lane < warps:
                w = np.int64(s_scan[lane])
            w = warp_inclusive_scan_dev(w, lane)
            if lane < warps:
                s_scan[lane] = w
        cuda.syncthreads()
        if warp > 0:
            inclusive += np.int64(s_scan[warp - 1])
        total = np.int64(s_scan[warps - 1])
        cuda.syncthreads()
        return inclusive - value, total
    s_scan[tid] = value
    cuda.syncthreads()
    offset = 1
    while offset < num_threads:
        add = 0
        if tid >= offset:
            add = s_scan[tid - offset]
        cuda.syncthreads()
        s_scan[tid] += add
        cuda.syncthreads()
        offset *= 2
    inclusive = np.int64(s_scan[tid])
    total = np.int64(s_scan[num_threads - 1])
    cuda.syncthreads()
    return inclusive - value, total
