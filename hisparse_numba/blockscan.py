"""Block-wide exclusive prefix sum over shared memory: the ranking step of every kernel here.

Kernels rank things deterministically (misses in lane order, hit and evictable slots in LRU
order, unique misses by first occurrence, plan offsets by row) where sglang uses warp ballots or
lets atomics race. A Hillis-Steele scan with ``syncthreads`` works in the CUDA simulator too,
which has no warp intrinsics.
"""

from .device import cuda


@cuda.jit(device=True, inline=True)
def block_exclusive_scan(s_scan, value, tid, num_threads):
    """(exclusive prefix of ``value`` over threads ``0..tid-1``, block total).

    Every thread of the block calls it. ``s_scan`` is a shared array of at least
    ``num_threads`` entries of ``value``'s type. Ends with a barrier, so ``s_scan`` may be
    reused right away.
    """
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
    inclusive = s_scan[tid]
    total = s_scan[num_threads - 1]
    cuda.syncthreads()
    return inclusive - value, total
