"""Wrong answers to 15-e, the block scan that numbers misses."""

import numpy as np

from hisparse_numba.device import cuda

from . import race, wrong

PUZZLE = "15-e"
SCAN_MAX = 16


def make_scan(*, read_barrier=True, write_barrier=True, exclusive=True, rounds=True, total_thread=-1,
              early_return=False, barrier_in_if=False):
    @cuda.jit
    def number_misses(is_miss, miss_rank, miss_total):
        r, t, n, K = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x, is_miss.shape[1]
        s = cuda.shared.array(SCAN_MAX, np.int64)
        if early_return and t >= K:
            return                               # these threads miss every barrier below
        mine = np.int64(0)
        if t < K:
            mine = np.int64(is_miss[r, t])
        s[t] = mine
        cuda.syncthreads()
        offset = 1
        while offset < (n if rounds else 2):
            add = np.int64(0)
            if t >= offset:
                add = s[t - offset]
                if barrier_in_if:
                    cuda.syncthreads()
            if read_barrier and not barrier_in_if:
                cuda.syncthreads()
            s[t] += add
            if write_barrier:
                cuda.syncthreads()
            offset *= 2
        if t < K:
            miss_rank[r, t] = (s[t] - mine if exclusive else s[t]) if mine == 1 else -1
        if t == (n - 1 if total_thread == -1 else total_thread):
            miss_total[r] = s[t]
    return number_misses


@cuda.jit
def serial_in_thread_zero(is_miss, miss_rank, miss_total):
    r, t = cuda.blockIdx.x, cuda.threadIdx.x
    if t == 0:
        before = 0
        for k in range(is_miss.shape[1]):
            miss_rank[r, k] = before if is_miss[r, k] == 1 else -1
            before += is_miss[r, k]
        miss_total[r] = before


NO_BARRIER_BETWEEN_READ_AND_WRITE = race(make_scan(read_barrier=False), "a race", "s[")
NO_BARRIER_AFTER_THE_WRITE = race(make_scan(write_barrier=False), "a race", "s[")
BARRIER_INSIDE_THE_IF = race(make_scan(barrier_in_if=True), "a divergent barrier")
RETURNS_EARLY = race(make_scan(early_return=True), 'case "lanes not a multiple of the block"', "barrier")
INCLUSIVE = wrong(make_scan(exclusive=False), "miss_rank[0, 1]", "misses before it")
ONE_ROUND = wrong(make_scan(rounds=False), "misses before it")
TOTAL_FROM_THREAD_ZERO = wrong(make_scan(total_thread=0), "miss_total[0]")
SERIAL_IN_THREAD_ZERO = wrong(serial_in_thread_zero, "serial", simulator_only=True)
