"""Wrong answers to 15-f, the miss plan."""

import numpy as np

from hisparse_numba.blockscan import block_exclusive_scan_dev
from hisparse_numba.device import cuda

from . import race, wrong

PUZZLE = "15-f"
PLAN_MAX = 32


def make_plan(*, request_row=True, padding=True, lane_return=False, every_thread_counts=False, rank_shift=0):
    @cuda.jit
    def write_miss_plan(is_miss, top_k, req_pool_indices, host_locs, device_locs, evict, num_real,
                        miss_src, miss_dst, miss_count):
        b, t, K = cuda.blockIdx.x, cuda.threadIdx.x, top_k.shape[1]
        s_scan = cuda.shared.array(PLAN_MAX, np.int64)
        if padding and b >= num_real:
            return
        if lane_return and t >= K:
            return                               # these threads never reach the scan's barriers
        count = 0
        if t < K and is_miss[b, t] == 1:
            count = 1
        m, total = block_exclusive_scan_dev(s_scan, count, t, cuda.blockDim.x)
        m += rank_shift
        if count == 1:
            rid = req_pool_indices[b] if request_row else b
            miss_src[b, m] = host_locs[rid, top_k[b, t]]
            miss_dst[b, m] = device_locs[rid, evict[b, m]]
        if t == 0 or every_thread_counts:
            miss_count[b] = total
    return write_miss_plan


BATCH_ROW_FOR_REQUEST_ROW = wrong(make_plan(request_row=False), 'case "a real swap-in step"')
WRITES_PADDING_ROWS = wrong(make_plan(padding=False), 'case "padding rows"')
LANES_RETURN_BEFORE_THE_SCAN = race(make_plan(lane_return=True), 'case "lanes not a multiple of the block"',
                                    "barrier")
EVERY_THREAD_WRITES_THE_COUNT = race(make_plan(every_thread_counts=True), "a race", "miss_count")
INCLUSIVE_RANK = wrong(make_plan(rank_shift=1), 'case "a real swap-in step"')
