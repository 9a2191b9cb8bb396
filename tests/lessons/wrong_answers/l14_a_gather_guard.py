"""Wrong answers to 14-a, the gather's bounds guard."""

from hisparse_numba.device import cuda

from . import wrong

PUZZLE = "14-a"


@cuda.jit
def guard_of_the_example(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < 12:                               # the example's 12 words, not this call's
        pair = i // words_per_item
        w = i % words_per_item
        dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


@cuda.jit
def no_guard(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    pair = i // words_per_item
    w = i % words_per_item
    dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


@cuda.jit
def guard_off_by_one(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i <= src_locs.shape[0] * words_per_item:
        pair = i // words_per_item
        w = i % words_per_item
        dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


@cuda.jit
def forgets_the_block(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.threadIdx.x                     # block 1 redoes block 0's words
    if i < src_locs.shape[0] * words_per_item:
        pair = i // words_per_item
        w = i % words_per_item
        dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


@cuda.jit
def guard_on_the_grid(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < cuda.gridDim.x * cuda.blockDim.x:     # every thread passes: the grid is not the data
        pair = i // words_per_item
        w = i % words_per_item
        dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


@cuda.jit
def serial_in_thread_zero(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i == 0:                               # right bytes, one thread: a CPU loop on a GPU
        for j in range(src_locs.shape[0] * words_per_item):
            pair = j // words_per_item
            w = j % words_per_item
            dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


GUARD_OF_THE_EXAMPLE = wrong(guard_of_the_example, 'case "one word short of whole blocks"', "no thread wrote")
NO_GUARD = wrong(no_guard, "the lesson's example")
GUARD_OFF_BY_ONE = wrong(guard_off_by_one, "the lesson's example")
FORGETS_THE_BLOCK = wrong(forgets_the_block, "the lesson's example", "no thread wrote")
GUARD_ON_THE_GRID = wrong(guard_on_the_grid, "the lesson's example")
SERIAL_IN_THREAD_ZERO = wrong(serial_in_thread_zero, "your thread (0, 0) wrote 12 elements", "serial",
                              simulator_only=True)
