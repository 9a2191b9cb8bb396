"""Wrong answers to 15-b, the warp vote."""

from hisparse_numba.device import cuda

from . import race, wrong

PUZZLE = "15-b"
FULL = 0xFFFFFFFF


@cuda.jit
def returns_before_the_vote(rows, num_real, any_miss, miss_mask):
    r, k = cuda.blockIdx.x, cuda.threadIdx.x
    if k >= rows.shape[1] or r >= num_real:  # lanes without a selection leave: the vote waits for them
        return
    miss = rows[r, k] == -1
    anyone = cuda.any_sync(FULL, miss)
    which = cuda.ballot_sync(FULL, miss)
    if k == 0:
        any_miss[r] = anyone
        miss_mask[r] = which & FULL


@cuda.jit
def every_lane_writes(rows, num_real, any_miss, miss_mask):
    r, k = cuda.blockIdx.x, cuda.threadIdx.x
    miss = False
    if k < rows.shape[1] and r < num_real:
        miss = rows[r, k] == -1
    anyone = cuda.any_sync(FULL, miss)
    which = cuda.ballot_sync(FULL, miss)
    any_miss[r] = anyone                     # 32 writers of one element
    miss_mask[r] = which


@cuda.jit
def mask_of_lane_zero(rows, num_real, any_miss, miss_mask):
    r, k = cuda.blockIdx.x, cuda.threadIdx.x
    miss = False
    if k < rows.shape[1] and r < num_real:
        miss = rows[r, k] == -1
    anyone = cuda.any_sync(FULL, miss)
    which = cuda.ballot_sync(1, miss)        # the mask names the lanes that vote, not the lane that asks
    if k == 0:
        any_miss[r] = anyone
        miss_mask[r] = which & FULL


@cuda.jit
def ignores_padding_rows(rows, num_real, any_miss, miss_mask):
    r, k = cuda.blockIdx.x, cuda.threadIdx.x
    miss = False
    if k < rows.shape[1]:
        miss = rows[r, k] == -1
    anyone = cuda.any_sync(FULL, miss)
    which = cuda.ballot_sync(FULL, miss)
    if k == 0:
        any_miss[r] = anyone
        miss_mask[r] = which & FULL


@cuda.jit
def serial_in_lane_zero(rows, num_real, any_miss, miss_mask):
    r, k = cuda.blockIdx.x, cuda.threadIdx.x
    if k == 0:
        which = 0
        if r < num_real:
            for j in range(rows.shape[1]):
                if rows[r, j] == -1:
                    which |= 1 << j
        any_miss[r] = 1 if which != 0 else 0
        miss_mask[r] = which


@cuda.jit
def keeps_the_sign(rows, num_real, any_miss, miss_mask):
    r, k = cuda.blockIdx.x, cuda.threadIdx.x
    miss = False
    if k < rows.shape[1] and r < num_real:
        miss = rows[r, k] == -1
    anyone = cuda.any_sync(FULL, miss)
    which = cuda.ballot_sync(FULL, miss)
    if k == 0:
        any_miss[r] = anyone
        miss_mask[r] = which                 # lane 31's vote is the sign bit: -1, not 0xffffffff


RETURNS_BEFORE_THE_VOTE = race(returns_before_the_vote, "did not reach this warp vote", "barrier")
EVERY_LANE_WRITES = race(every_lane_writes, "a race", "any_miss")
MASK_OF_LANE_ZERO = wrong(mask_of_lane_zero, "miss_mask[0]", simulator_only=True)   # on a GPU: undefined
IGNORES_PADDING_ROWS = wrong(ignores_padding_rows, 'case "padding rows"')
SERIAL_IN_LANE_ZERO = wrong(serial_in_lane_zero, "serial", simulator_only=True)
KEEPS_THE_SIGN = wrong(keeps_the_sign, 'case "all misses"', "signed 32-bit", "m & 0xFFFFFFFF")
