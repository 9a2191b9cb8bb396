"""Small racy and race-free kernels for tests/lessons/test_racecheck.py.

A comment ``# @name`` marks a line the tests look up with ``line_of(kernel, "name")``.
"""

import inspect

import numpy as np

from hisparse_numba.blockscan import block_exclusive_scan_dev
from hisparse_numba.device import cuda

N = 16


def line_of(kernel, marker: str) -> int:
    """The file line number of the line of ``kernel``'s source that ends with ``# @marker``."""
    lines, first = inspect.getsourcelines(getattr(kernel, "py_func", kernel))
    (i,) = [i for i, text in enumerate(lines) if text.rstrip().endswith(f"# @{marker}")]
    return first + i


@cuda.jit
def scan_right(values, out):
    t = cuda.threadIdx.x
    s = cuda.shared.array(N, np.int64)
    s[t] = values[t]
    cuda.syncthreads()
    offset = 1
    while offset < N:
        add = np.int64(0)
        if t >= offset:
            add = s[t - offset]
        cuda.syncthreads()
        s[t] += add
        cuda.syncthreads()
        offset *= 2
    out[t] = s[t]


@cuda.jit
def scan_no_barrier_between_read_and_write(values, out):
    t = cuda.threadIdx.x
    s = cuda.shared.array(N, np.int64)
    s[t] = values[t]
    cuda.syncthreads()
    offset = 1
    while offset < N:
        add = np.int64(0)
        if t >= offset:
            add = s[t - offset]        # @read
        s[t] += add                    # @write
        cuda.syncthreads()
        offset *= 2
    out[t] = s[t]


@cuda.jit
def reduce_no_barrier_in_loop(values, total):
    t = cuda.threadIdx.x
    s = cuda.shared.array(N, np.float32)
    s[t] = values[t]
    cuda.syncthreads()
    half = N // 2
    while half > 0:
        if t < half:
            s[t] = s[t] + s[t + half]  # @sum
        half //= 2                     # the barrier between rounds is missing
    if t == 0:
        total[0] = s[0]


@cuda.jit
def every_block_writes_the_same(out):
    out[cuda.threadIdx.x] = cuda.blockIdx.x          # @write


@cuda.jit
def atomics_only(values, total, biggest):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    cuda.atomic.add(total, 0, values[i])
    cuda.atomic.max(biggest, 0, values[i])


@cuda.jit
def atomic_then_plain_read(values, total, seen):
    t = cuda.threadIdx.x
    cuda.atomic.add(total, 0, values[t])              # @add
    seen[t] = total[0]                                # @read


@cuda.jit
def barrier_inside_if(values, out):
    t = cuda.threadIdx.x
    s = cuda.shared.array(N, np.int64)
    s[t] = values[t]
    if t < 8:
        cuda.syncthreads()                            # @barrier
    out[t] = s[N - 1 - t]


@cuda.jit
def return_before_barrier(values, out):
    t = cuda.threadIdx.x
    s = cuda.shared.array(N, np.int64)
    if t >= 12:
        return
    s[t] = values[t]
    cuda.syncthreads()                                # @barrier
    out[t] = s[11 - t]


@cuda.jit
def row_view(tags, positions, slots):
    r = cuda.blockIdx.x
    k = cuda.threadIdx.x
    row = tags[r]                                     # a view of request r's row
    found = -1
    for s in range(row.shape[0]):
        if row[s] == positions[r, k]:                 # @row
            found = s
    slots[r, k] = found


@cuda.jit
def slices_and_rows(a, out):
    t = cuda.threadIdx.x
    window = a[2:10]                                  # elements 2..9
    tail = out[1]                                     # row 1 of a 2-D array
    tail[t] = window[t] + window[t + 1 - 1]


@cuda.jit
def transpose_through_shared(a, out):
    ty, tx = cuda.threadIdx.y, cuda.threadIdx.x
    tile = cuda.shared.array((4, 8), np.int32)
    tile[ty, tx] = a[ty, tx]
    cuda.syncthreads()
    i = ty * 8 + tx
    out[i % 8, i // 8] = tile[i // 8, i % 8]


@cuda.jit
def transpose_without_barrier(a, out):
    ty, tx = cuda.threadIdx.y, cuda.threadIdx.x
    tile = cuda.shared.array((4, 8), np.int32)
    tile[ty, tx] = a[ty, tx]                          # @store
    i = ty * 8 + tx
    out[i % 8, i // 8] = tile[(31 - i) // 8, (31 - i) % 8]   # @load


@cuda.jit
def all_write_one_element(out):
    out[0] = cuda.threadIdx.x                         # @write


@cuda.jit
def count_with_barrier(flags, counts):
    t = cuda.threadIdx.x
    n = cuda.syncthreads_count(flags[t])
    both = cuda.syncthreads_and(flags[t])
    some = cuda.syncthreads_or(flags[t])
    if t == 0:
        counts[0] = n
        counts[1] = both
        counts[2] = some


@cuda.jit
def thread_zero_waits_for_thread_one(flag, out):
    t = cuda.threadIdx.x
    if t == 0:
        while cuda.atomic.add(flag, 0, 0) == 0:       # spins until thread 1 has set the flag
            pass
        out[0] = 1
    else:
        cuda.atomic.exch(flag, 0, 1)


@cuda.jit
def out_of_bounds_row(tags, out):
    t = cuda.threadIdx.x
    row = tags[t]                                     # tags has 2 rows, the block 3 threads
    out[t] = row[0]


@cuda.jit
def float_index(a, out):
    out[0] = a[1.0]


@cuda.jit
def whole_array_method(a, out):
    out[0] = a.sum()


@cuda.jit
def block_zero_waits_for_block_one(flag, out):
    if cuda.blockIdx.x == 0:
        while flag[0] == 0:                           # blocks run one after another in the simulator
            pass
        out[0] = 1
    else:
        flag[0] = 1


@cuda.jit(device=True)
def fill_dev(buffer, t):
    buffer[t] = t                                     # @fill


@cuda.jit
def unnamed_shared(out):
    t = cuda.threadIdx.x
    fill_dev(cuda.shared.array(4, np.int32), t)
    out[t] = t


@cuda.jit
def barriers_in_both_branches(values, out):
    t = cuda.threadIdx.x
    if t % 2 == 0:
        cuda.syncthreads()                            # @even
    else:
        cuda.syncthreads()                            # @odd
    out[t] = values[t]


@cuda.jit
def shared_counter_never_zeroed(values, total):
    t = cuda.threadIdx.x
    count = cuda.shared.array(1, np.int64)
    cuda.atomic.add(count, 0, values[t])              # @add
    cuda.syncthreads()
    if t == 0:
        total[0] = count[0]


@cuda.jit
def shared_counter_zeroed(values, total):
    t = cuda.threadIdx.x
    count = cuda.shared.array(1, np.int64)
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    cuda.atomic.add(count, 0, values[t])
    cuda.syncthreads()
    if t == 0:
        total[0] = count[0]


@cuda.jit
def thread_two_raises(out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == 2:
        raise ValueError("thread two")
    cuda.syncthreads()
    out[t] = t


@cuda.jit
def slice_assign_and_negative_index(a, out):
    if cuda.threadIdx.x == 0:
        out[0:4] = a[4:8]                             # four reads of a, four writes of out
        out[4] = a[-1]                                # past the front: logged, not performed
        out[5] = a.nbytes


@cuda.jit
def loops_forever(out):
    x = 0
    while x >= 0:                                     # never ends, touching no array
        x = (x + 1) % 7
    out[0] = x


@cuda.jit
def loops_forever_reading(a, out):
    x = 0
    while a[0] == 0:                                  # never ends, reading a again and again
        x += 1
    out[0] = x


@cuda.jit
def library_scan_inside_if(values, out):
    t = cuda.threadIdx.x
    s = cuda.shared.array(N, np.int64)
    if t < 8:
        offset, total = block_exclusive_scan_dev(s, values[t], t, 8)   # @call
        out[t] = offset


@cuda.jit(device=True)
def put_dev(buffer, i, value):
    buffer[i] = value                                 # @put


@cuda.jit
def write_in_device_function_read_in_kernel(out):
    t = cuda.threadIdx.x
    s = cuda.shared.array(4, np.int64)
    put_dev(s, t, t)                                  # @call
    out[t] = s[(t + 1) % 4]                           # @read
