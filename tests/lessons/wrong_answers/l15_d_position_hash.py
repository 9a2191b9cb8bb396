"""Wrong answers to 15-d, the position hash built in shared memory."""

import numpy as np

from hisparse_numba.device import cuda
from hisparse_numba.hisparse.single_step.hash import HASH_MULTIPLIER

from . import race, wrong

PUZZLE = "15-d"
HASH_MAX = 32


def make_build(*, cas=True, fill_barrier=True, copy_barrier=True, fill_loop=True, repeats=True, wrap=True):
    @cuda.jit
    def build_position_hash(top_k, table, inserted):
        r, k, K, size = cuda.blockIdx.x, cuda.threadIdx.x, top_k.shape[1], table.shape[1]
        s_hash = cuda.shared.array(HASH_MAX, np.int64)
        j = k
        while j < size:
            s_hash[j] = -1
            j += cuda.blockDim.x if fill_loop else size
        if fill_barrier:
            cuda.syncthreads()
        if k < K:
            key = np.int64(top_k[r, k])
            h = ((key * HASH_MULTIPLIER) & 0xFFFFFFFF) % size
            ok = 0
            while True:
                entry = (key << 16) | k
                if cas:
                    old = cuda.atomic.cas(s_hash, h, -1, entry)
                else:
                    old = s_hash[h]              # test, then set: two steps
                    if old == -1:
                        s_hash[h] = entry
                if old == -1:
                    ok = 1
                    break
                if repeats and (old >> 16) == key:
                    break
                h += 1
                if wrap and h == size:
                    h = 0
            inserted[r, k] = ok
        if copy_barrier:
            cuda.syncthreads()
        j = k
        while j < size:
            table[r, j] = s_hash[j]
            j += cuda.blockDim.x
    return build_position_hash


TEST_THEN_SET = race(make_build(cas=False), "a race", "s_hash")
NO_BARRIER_AFTER_THE_FILL = race(make_build(fill_barrier=False), "a race", "s_hash")
NO_BARRIER_BEFORE_THE_COPY = race(make_build(copy_barrier=False), "a race", "s_hash")
FILLS_ONE_ENTRY_PER_THREAD = wrong(make_build(fill_loop=False), "uninitialised shared memory", "s_hash[8]",
                                   simulator_only=True)
INSERTS_REPEATS = wrong(make_build(repeats=False), 'case "duplicates"', "twice")
@cuda.jit
def serial_in_thread_zero(top_k, table, inserted):
    r, k, size = cuda.blockIdx.x, cuda.threadIdx.x, table.shape[1]
    if k == 0:                               # one thread builds the table: no race, no parallelism
        for j in range(size):
            table[r, j] = -1
        for lane in range(top_k.shape[1]):
            key = np.int64(top_k[r, lane])
            h = ((key * HASH_MULTIPLIER) & 0xFFFFFFFF) % size
            ok = 1
            while table[r, h] != -1:
                if (table[r, h] >> 16) == key:
                    ok = 0
                    break
                h = (h + 1) % size
            if ok == 1:
                table[r, h] = (key << 16) | lane
            inserted[r, lane] = ok


SERIAL_IN_THREAD_ZERO = wrong(serial_in_thread_zero, "serial", simulator_only=True)
NO_WRAP = wrong(make_build(wrap=False), 'case "wrap around the end"', simulator_only=True)
