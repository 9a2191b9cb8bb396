# Solutions to lesson 14's kernel puzzles: each section is the solved exercise cell.

# exercise: 14-a
@cuda.jit
def gather_words(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x     # this thread's word of all the pairs
    if i < src_locs.shape[0] * words_per_item:      # 16 threads, 12 words: 4 threads have no word
        pair = i // words_per_item
        w = i % words_per_item
        dst_words[dst_locs[pair] * words_per_item + w] = src_words[src_locs[pair] * words_per_item + w]

ex14.check_gather_guard(gather_words)

# exercise: 14-b
@cuda.jit(device=True, inline=True)
def copy_item_dev(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    src = src_loc * words_per_item
    dst = dst_loc * words_per_item
    w = 2 * lane                         # the first word of this lane's first chunk
    while w < words_per_item:
        dst_words[dst + w] = src_words[src + w]
        dst_words[dst + w + 1] = src_words[src + w + 1]
        w += 2 * num_lanes               # the lane's next chunk

ex14.check_chunk_loop(copy_item_dev)

# exercise: 14-c
@cuda.jit(device=True, inline=True)
def find_slot_dev(tags, r, hot_buffer_size, position):
    for s in range(hot_buffer_size):     # not column hot_buffer_size: that is the newest token's
        if tags[r, s] == position:
            return s
    return -1

ex14.check_hit_test(find_slot_dev)

# exercise: 14-d
SCAN_THREADS = 16

@cuda.jit
def number_misses(is_miss, miss_rank, miss_total):
    tid = cuda.threadIdx.x
    s = cuda.shared.array(SCAN_THREADS, np.int64)
    mine = np.int64(is_miss[tid])
    s[tid] = mine
    cuda.syncthreads()
    offset = 1
    while offset < SCAN_THREADS:
        add = np.int64(0)
        if tid >= offset:
            add = s[tid - offset]
        cuda.syncthreads()               # everyone has read before anyone writes
        s[tid] += add
        cuda.syncthreads()
        offset *= 2
    miss_rank[tid] = s[tid] - mine if mine == 1 else -1     # exclusive = inclusive - own value
    if tid == SCAN_THREADS - 1:
        miss_total[0] = s[tid]

ex14.check_miss_scan(number_misses)

# exercise: 14-e
from hisparse_numba.kv_canary.hashing import splitmix64_dev

@cuda.jit(device=True, inline=True)
def mix3_dev(prev_hash, token, position):
    acc = splitmix64_dev(np.uint64(prev_hash))
    acc = splitmix64_dev(acc ^ np.uint64(token))       # int64 ^ uint64 would not be a uint64
    return splitmix64_dev(acc ^ np.uint64(position))

ex14.check_chain_step(mix3_dev)

# exercise: 14-f
from hisparse_numba.blockscan import block_exclusive_scan_dev

@cuda.jit
def verify_capacity_kernel(req_pool_indices, prefix_lens, swa_window_size, verify_capacity,
                           verify_offsets, verify_num_valid, enable):
    tid = cuda.threadIdx.x
    bs = req_pool_indices.shape[0]
    s_scan = cuda.shared.array(32, np.int64)
    count = np.int64(0)
    if tid < bs and req_pool_indices[tid] != 0:          # row 0 of the pool is the padding row
        start = np.int64(0)
        if swa_window_size > 0:
            start = max(prefix_lens[tid] - swa_window_size, 0)
        count = max(prefix_lens[tid] - start, 0)
    offset, total = block_exclusive_scan_dev(s_scan, count, tid, cuda.blockDim.x)
    if tid < bs:
        verify_offsets[tid] = offset
    if tid == 0:
        verify_offsets[bs] = total
        verify_num_valid[0] = min(total, verify_capacity)
        enable[0] = 1 if total <= verify_capacity else 0   # exactly full still fits

ex14.check_verify_capacity(verify_capacity_kernel)
