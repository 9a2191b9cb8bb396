"""Right and plausibly wrong answers to lesson 14's puzzles, for tests/lessons/test_ex14.py."""

import numpy as np

from hisparse_numba.blockscan import block_exclusive_scan_dev
from hisparse_numba.device import cuda
from hisparse_numba.kv_canary.hashing import splitmix64_dev

# a: the gather's bounds guard


@cuda.jit
def gather_right(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < src_locs.shape[0] * words_per_item:
        pair = i // words_per_item
        w = i % words_per_item
        dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


@cuda.jit
def gather_unguarded(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    pair = i // words_per_item
    w = i % words_per_item
    dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


@cuda.jit
def gather_guard_on_pairs_off_by_one(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    pair = i // words_per_item
    if pair <= src_locs.shape[0]:
        w = i % words_per_item
        dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


@cuda.jit
def gather_guard_on_threads_of_a_block(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.threadIdx.x                     # forgets the block: block 1 redoes block 0's words
    if i < src_locs.shape[0] * words_per_item:
        pair = i // words_per_item
        w = i % words_per_item
        dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]


@cuda.jit
def gather_stub(src_words, dst_words, src_locs, dst_locs, words_per_item):
    raise NotImplementedError("hint")


# b: the 16-byte chunk loop


@cuda.jit(device=True, inline=True)
def chunks_right(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    w = 2 * lane
    while w < words_per_item:
        dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w]
        dst_words[dst_loc * words_per_item + w + 1] = src_words[src_loc * words_per_item + w + 1]
        w += 2 * num_lanes


@cuda.jit(device=True, inline=True)
def chunks_by_word(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    w = lane                                 # 8-byte words, not 16-byte chunks: bytes right, chunks split
    while w < words_per_item:
        dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w]
        w += num_lanes


@cuda.jit(device=True, inline=True)
def chunks_step_one(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    w = 2 * lane                             # every lane walks on to the end: chunks copied several times
    while w < words_per_item:
        dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w]
        dst_words[dst_loc * words_per_item + w + 1] = src_words[src_loc * words_per_item + w + 1]
        w += 2


@cuda.jit(device=True, inline=True)
def chunks_one_round(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    w = 2 * lane                             # one chunk per lane: the fifth chunk never moves
    if w < words_per_item:
        dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w]
        dst_words[dst_loc * words_per_item + w + 1] = src_words[src_loc * words_per_item + w + 1]


# c: the hit test


@cuda.jit(device=True, inline=True)
def find_right(tags, r, hot_buffer_size, position):
    for s in range(hot_buffer_size):
        if tags[r, s] == position:
            return s
    return -1


@cuda.jit(device=True, inline=True)
def find_including_newest_column(tags, r, hot_buffer_size, position):
    for s in range(hot_buffer_size + 1):
        if tags[r, s] == position:
            return s
    return -1


@cuda.jit(device=True, inline=True)
def find_request_zero(tags, r, hot_buffer_size, position):
    for s in range(hot_buffer_size):
        if tags[0, s] == position:
            return s
    return -1


@cuda.jit(device=True, inline=True)
def find_returns_last_slot(tags, r, hot_buffer_size, position):
    s = 0
    while s < hot_buffer_size - 1 and tags[r, s] != position:
        s += 1
    return s


# d: the miss scan

THREADS = 16


@cuda.jit
def scan_right(is_miss, miss_rank, miss_total):
    tid = cuda.threadIdx.x
    s = cuda.shared.array(THREADS, np.int64)
    mine = np.int64(is_miss[tid])
    s[tid] = mine
    cuda.syncthreads()
    offset = 1
    while offset < THREADS:
        add = np.int64(0)
        if tid >= offset:
            add = s[tid - offset]
        cuda.syncthreads()
        s[tid] += add
        cuda.syncthreads()
        offset *= 2
    miss_rank[tid] = s[tid] - mine if mine == 1 else -1
    if tid == THREADS - 1:
        miss_total[0] = s[tid]


@cuda.jit
def scan_inclusive(is_miss, miss_rank, miss_total):
    tid = cuda.threadIdx.x
    s = cuda.shared.array(THREADS, np.int64)
    mine = np.int64(is_miss[tid])
    s[tid] = mine
    cuda.syncthreads()
    offset = 1
    while offset < THREADS:
        add = np.int64(0)
        if tid >= offset:
            add = s[tid - offset]
        cuda.syncthreads()
        s[tid] += add
        cuda.syncthreads()
        offset *= 2
    miss_rank[tid] = s[tid] if mine == 1 else -1
    if tid == THREADS - 1:
        miss_total[0] = s[tid]


@cuda.jit
def scan_one_round(is_miss, miss_rank, miss_total):
    tid = cuda.threadIdx.x
    s = cuda.shared.array(THREADS, np.int64)
    mine = np.int64(is_miss[tid])
    s[tid] = mine
    cuda.syncthreads()
    add = np.int64(0)
    if tid >= 1:
        add = s[tid - 1]
    cuda.syncthreads()
    s[tid] += add
    cuda.syncthreads()
    miss_rank[tid] = s[tid] - mine if mine == 1 else -1
    if tid == THREADS - 1:
        miss_total[0] = s[tid]


@cuda.jit
def scan_total_from_thread_zero(is_miss, miss_rank, miss_total):
    tid = cuda.threadIdx.x
    s = cuda.shared.array(THREADS, np.int64)
    mine = np.int64(is_miss[tid])
    s[tid] = mine
    cuda.syncthreads()
    offset = 1
    while offset < THREADS:
        add = np.int64(0)
        if tid >= offset:
            add = s[tid - offset]
        cuda.syncthreads()
        s[tid] += add
        cuda.syncthreads()
        offset *= 2
    miss_rank[tid] = s[tid] - mine if mine == 1 else -1
    if tid == 0:
        miss_total[0] = s[tid]


# e: the chain step


@cuda.jit(device=True, inline=True)
def mix3_right(a, b, c):
    acc = splitmix64_dev(np.uint64(a))
    acc = splitmix64_dev(acc ^ np.uint64(b))
    return splitmix64_dev(acc ^ np.uint64(c))


@cuda.jit(device=True, inline=True)
def mix3_xor_first(a, b, c):
    acc = splitmix64_dev(np.uint64(a) ^ np.uint64(b))
    return splitmix64_dev(acc ^ np.uint64(c))


@cuda.jit(device=True, inline=True)
def mix3_position_first(a, b, c):
    acc = splitmix64_dev(np.uint64(a))
    acc = splitmix64_dev(acc ^ np.uint64(c))
    return splitmix64_dev(acc ^ np.uint64(b))


@cuda.jit(device=True, inline=True)
def mix3_no_cast(a, b, c):
    acc = splitmix64_dev(np.uint64(a))
    acc = splitmix64_dev(acc ^ b)         # uint64 ^ int64: not a uint64 any more
    return splitmix64_dev(acc ^ c)


# f: the verify capacity


def make_capacity_kernel(count_padding=False, ignore_window=False, strict=False):
    @cuda.jit
    def kernel(req_pool_indices, prefix_lens, swa_window_size, verify_capacity, verify_offsets,
               verify_num_valid, enable):
        tid = cuda.threadIdx.x
        bs = req_pool_indices.shape[0]
        s_scan = cuda.shared.array(32, np.int64)
        count = np.int64(0)
        if tid < bs and (count_padding or req_pool_indices[tid] != 0):
            start = np.int64(0)
            if swa_window_size > 0 and not ignore_window:
                start = max(prefix_lens[tid] - swa_window_size, 0)
            count = max(prefix_lens[tid] - start, 0)
        offset, total = block_exclusive_scan_dev(s_scan, count, tid, cuda.blockDim.x)
        if tid < bs:
            verify_offsets[tid] = offset
        if tid == 0:
            verify_offsets[bs] = total
            verify_num_valid[0] = min(total, verify_capacity)
            fits = total < verify_capacity if strict else total <= verify_capacity
            enable[0] = 1 if fits else 0
    return kernel


capacity_right = make_capacity_kernel()
capacity_counts_padding = make_capacity_kernel(count_padding=True)
capacity_ignores_window = make_capacity_kernel(ignore_window=True)
capacity_strict = make_capacity_kernel(strict=True)
