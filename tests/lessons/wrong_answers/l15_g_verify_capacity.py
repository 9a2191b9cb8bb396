"""Wrong answers to 15-g, the verify capacity."""

import numpy as np

from hisparse_numba.blockscan import block_exclusive_scan_dev
from hisparse_numba.device import cuda

from . import race, wrong

PUZZLE = "15-g"


def make_capacity(count_padding=False, ignore_window=False, strict=False, early_return=False,
                  every_thread_total=False):
    @cuda.jit
    def kernel(req_pool_indices, prefix_lens, swa_window_size, verify_capacity, verify_offsets,
               verify_num_valid, enable):
        tid = cuda.threadIdx.x
        bs = req_pool_indices.shape[0]
        s_scan = cuda.shared.array(32, np.int64)
        if early_return and tid >= bs:
            return                               # the scan's barriers wait for these threads
        count = np.int64(0)
        if tid < bs and (count_padding or req_pool_indices[tid] != 0):
            start = np.int64(0)
            if swa_window_size > 0 and not ignore_window:
                start = max(prefix_lens[tid] - swa_window_size, 0)
            count = max(prefix_lens[tid] - start, 0)
        offset, total = block_exclusive_scan_dev(s_scan, count, tid, cuda.blockDim.x)
        if tid < bs:
            verify_offsets[tid] = offset
        if tid == 0 or every_thread_total:
            verify_offsets[bs] = total
            verify_num_valid[0] = min(total, verify_capacity)
            fits = total < verify_capacity if strict else total <= verify_capacity
            enable[0] = 1 if fits else 0
    return kernel


@cuda.jit
def serial_in_thread_zero(req_pool_indices, prefix_lens, swa_window_size, verify_capacity, verify_offsets,
                          verify_num_valid, enable):
    if cuda.threadIdx.x == 0:                # right numbers, one thread: no scan at all
        total = 0
        for r in range(req_pool_indices.shape[0]):
            verify_offsets[r] = total
            if req_pool_indices[r] != 0:
                start = max(prefix_lens[r] - swa_window_size, 0) if swa_window_size > 0 else 0
                total += max(prefix_lens[r] - start, 0)
        verify_offsets[req_pool_indices.shape[0]] = total
        verify_num_valid[0] = min(total, verify_capacity)
        enable[0] = 1 if total <= verify_capacity else 0


SERIAL_IN_THREAD_ZERO = wrong(serial_in_thread_zero, "serial", simulator_only=True)
COUNTS_PADDING = wrong(make_capacity(count_padding=True), 'case "fits"', "verify_offsets[2]")
IGNORES_WINDOW = wrong(make_capacity(ignore_window=True), 'case "fits exactly"')
STRICT = wrong(make_capacity(strict=True), 'case "fits exactly"', "enable[0]")
RETURNS_EARLY = race(make_capacity(early_return=True), "a divergent barrier", "barrier")
EVERY_THREAD_WRITES_THE_TOTAL = race(make_capacity(every_thread_total=True), "a race", "verify_offsets")
