"""Wrong answers to 15-c, the atomic claim."""

from hisparse_numba.device import cuda

from . import race, wrong

PUZZLE = "15-c"


@cuda.jit
def read_then_write(is_miss, claimed, count):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < is_miss.shape[0] and is_miss[i] == 1:
        slot = count[0]                      # another lane can read the same count before this write
        count[0] = slot + 1
        claimed[slot] = i


@cuda.jit
def own_lane_as_entry(is_miss, claimed, count):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < is_miss.shape[0] and is_miss[i] == 1:
        cuda.atomic.add(count, 0, 1)
        claimed[i] = i                       # the lane's index, not the entry it claimed


@cuda.jit
def new_value_as_entry(is_miss, claimed, count):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < is_miss.shape[0] and is_miss[i] == 1:
        slot = cuda.atomic.add(count, 0, 1) + 1      # atomic.add returns the value before the add
        if slot < claimed.shape[0]:
            claimed[slot] = i


@cuda.jit
def no_guard(is_miss, claimed, count):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if is_miss[i] == 1:
        slot = cuda.atomic.add(count, 0, 1)
        claimed[slot] = i


@cuda.jit
def serial_in_thread_zero(is_miss, claimed, count):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i == 0:
        for j in range(is_miss.shape[0]):
            if is_miss[j] == 1:
                claimed[count[0]] = j
                count[0] += 1


READ_THEN_WRITE = race(read_then_write, "a race", "count[0]")
OWN_LANE_AS_ENTRY = wrong(own_lane_as_entry, "the lesson's example", "claimed[")
NEW_VALUE_AS_ENTRY = wrong(new_value_as_entry, "claimed[0] holds nothing")
NO_GUARD = wrong(no_guard, "the lesson's example", simulator_only=True)     # a GPU reads the arena's zeros
SERIAL_IN_THREAD_ZERO = wrong(serial_in_thread_zero, "serial", simulator_only=True)
