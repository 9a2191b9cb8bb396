"""Wrong answers to 15-a, stage a row in shared memory, barrier, read a neighbour."""

import numpy as np

from hisparse_numba.device import cuda

from . import race, wrong

PUZZLE = "15-a"
ROW_MAX = 32


@cuda.jit
def no_barrier(sorted_pos, first):
    r, k, K = cuda.blockIdx.x, cuda.threadIdx.x, sorted_pos.shape[1]
    s_row = cuda.shared.array(ROW_MAX, np.int32)
    if k < K:
        s_row[k] = sorted_pos[r, k]
        first[r, k] = 1 if k == 0 or s_row[k] != s_row[k - 1] else 0     # the neighbour may not be there yet


@cuda.jit
def barrier_inside_the_if(sorted_pos, first):
    r, k, K = cuda.blockIdx.x, cuda.threadIdx.x, sorted_pos.shape[1]
    s_row = cuda.shared.array(ROW_MAX, np.int32)
    if k < K:
        s_row[k] = sorted_pos[r, k]
        cuda.syncthreads()                   # threads k >= K never reach it
        first[r, k] = 1 if k == 0 or s_row[k] != s_row[k - 1] else 0


@cuda.jit
def neighbour_from_global(sorted_pos, first):
    r, k, K = cuda.blockIdx.x, cuda.threadIdx.x, sorted_pos.shape[1]
    if k < K:                                # right values, two global reads per lane, no staging
        first[r, k] = 1 if k == 0 or sorted_pos[r, k] != sorted_pos[r, k - 1] else 0


@cuda.jit
def right_neighbour(sorted_pos, first):
    r, k, K = cuda.blockIdx.x, cuda.threadIdx.x, sorted_pos.shape[1]
    s_row = cuda.shared.array(ROW_MAX, np.int32)
    if k < K:
        s_row[k] = sorted_pos[r, k]
    cuda.syncthreads()
    if k < K:                                # marks the last of a run, not the first
        first[r, k] = 1 if k == K - 1 or s_row[k] != s_row[k + 1] else 0


@cuda.jit
def reads_the_neighbour_of_lane_zero(sorted_pos, first):
    r, k, K = cuda.blockIdx.x, cuda.threadIdx.x, sorted_pos.shape[1]
    s_row = cuda.shared.array(ROW_MAX, np.int32)
    if k < K:
        s_row[k] = sorted_pos[r, k]
    cuda.syncthreads()
    if k < K:                                # lane 0 reads s_row[-1]: garbage, never written
        first[r, k] = 1 if s_row[k] != s_row[k - 1] else 0


@cuda.jit
def serial_in_thread_zero(sorted_pos, first):
    r, k, K = cuda.blockIdx.x, cuda.threadIdx.x, sorted_pos.shape[1]
    if k == 0:
        for j in range(K):
            first[r, j] = 1 if j == 0 or sorted_pos[r, j] != sorted_pos[r, j - 1] else 0


NO_BARRIER = race(no_barrier, "a race", "s_row")
BARRIER_INSIDE_THE_IF = race(barrier_inside_the_if, "a divergent barrier", "barrier")
NEIGHBOUR_FROM_GLOBAL = wrong(neighbour_from_global, "read 2 elements of sorted_pos", simulator_only=True)
RIGHT_NEIGHBOUR = wrong(right_neighbour, "the lesson's example")
READS_THE_NEIGHBOUR_OF_LANE_ZERO = wrong(reads_the_neighbour_of_lane_zero, "element -1 of s_row",
                                         simulator_only=True)
SERIAL_IN_THREAD_ZERO = wrong(serial_in_thread_zero, "serial", simulator_only=True)
