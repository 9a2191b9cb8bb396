# Solutions to lesson 15's kernel puzzles: each section is the solved exercise cell.

# exercise: 15-a
ROW_MAX = 32

@cuda.jit
def mark_first(sorted_pos, first):
    r = cuda.blockIdx.x
    k = cuda.threadIdx.x
    K = sorted_pos.shape[1]
    s_row = cuda.shared.array(ROW_MAX, np.int32)
    if k < K:
        s_row[k] = sorted_pos[r, k]      # one global read per lane
    cuda.syncthreads()                   # outside the if: every thread of the block reaches it
    if k < K:
        first[r, k] = 1 if k == 0 or s_row[k] != s_row[k - 1] else 0

ex15.check_stage_row(mark_first)

# exercise: 15-b
FULL_MASK = 0xFFFFFFFF

@cuda.jit
def vote_misses(rows, num_real, any_miss, miss_mask):
    r = cuda.blockIdx.x
    k = cuda.threadIdx.x                 # one warp per request: the lane
    miss = False
    if k < rows.shape[1] and r < num_real:
        miss = rows[r, k] == -1
    anyone = cuda.any_sync(FULL_MASK, miss)          # every lane votes, even one without a selection
    which = cuda.ballot_sync(FULL_MASK, miss)
    if k == 0:                           # one writer per output
        any_miss[r] = anyone
        miss_mask[r] = which & FULL_MASK  # a ballot is a signed 32-bit int: keep its bits, not its sign

ex15.check_warp_vote(vote_misses)

# exercise: 15-c
@cuda.jit
def claim_slots(is_miss, claimed, count):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < is_miss.shape[0] and is_miss[i] == 1:
        slot = cuda.atomic.add(count, 0, 1)          # the count before this add: this lane's entry
        claimed[slot] = i

ex15.check_atomic_claim(claim_slots)

# exercise: 15-d
from hisparse_numba.hisparse.single_step.hash import HASH_MULTIPLIER

HASH_MAX = 32

@cuda.jit
def build_position_hash(top_k, table, inserted):
    r = cuda.blockIdx.x
    k = cuda.threadIdx.x
    K = top_k.shape[1]
    size = table.shape[1]
    s_hash = cuda.shared.array(HASH_MAX, np.int64)
    j = k
    while j < size:                      # the table may be larger than the block
        s_hash[j] = -1
        j += cuda.blockDim.x
    cuda.syncthreads()                   # the table is empty before anyone inserts
    if k < K:
        key = np.int64(top_k[r, k])
        h = ((key * HASH_MULTIPLIER) & 0xFFFFFFFF) % size
        ok = 0
        while True:
            old = cuda.atomic.cas(s_hash, h, -1, (key << 16) | k)
            if old == -1:                # the entry was empty and is ours now
                ok = 1
                break
            if (old >> 16) == key:       # a repeated position: the first lane keeps it
                break
            h += 1
            if h == size:
                h = 0
        inserted[r, k] = ok
    cuda.syncthreads()                   # every insert is done before the copy reads
    j = k
    while j < size:
        table[r, j] = s_hash[j]
        j += cuda.blockDim.x

ex15.check_position_hash(build_position_hash)

# exercise: 15-e
SCAN_MAX = 16

@cuda.jit
def number_misses(is_miss, miss_rank, miss_total):
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    K = is_miss.shape[1]
    s = cuda.shared.array(SCAN_MAX, np.int64)
    mine = np.int64(0)
    if t < K:
        mine = np.int64(is_miss[r, t])
    s[t] = mine                          # threads past K add 0, and take part in every barrier
    cuda.syncthreads()
    offset = 1
    while offset < n:
        add = np.int64(0)
        if t >= offset:
            add = s[t - offset]
        cuda.syncthreads()               # everyone has read before anyone writes
        s[t] += add
        cuda.syncthreads()               # everyone has written before the next round reads
        offset *= 2
    if t < K:
        miss_rank[r, t] = s[t] - mine if mine == 1 else -1      # exclusive = inclusive - own value
    if t == n - 1:
        miss_total[r] = s[t]

ex15.check_miss_scan(number_misses)

# exercise: 15-f
from hisparse_numba.blockscan import block_exclusive_scan_dev

PLAN_MAX = 32

@cuda.jit
def write_miss_plan(is_miss, top_k, req_pool_indices, host_locs, device_locs, evict, num_real,
                    miss_src, miss_dst, miss_count):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    K = top_k.shape[1]
    s_scan = cuda.shared.array(PLAN_MAX, np.int64)
    if b >= num_real:                    # a padding row: the whole block returns, no barrier is split
        return
    count = 0
    if t < K and is_miss[b, t] == 1:
        count = 1
    m, total = block_exclusive_scan_dev(s_scan, count, t, cuda.blockDim.x)   # every thread calls it
    if count == 1:
        rid = req_pool_indices[b]        # the request row, not the batch row
        miss_src[b, m] = host_locs[rid, top_k[b, t]]
        miss_dst[b, m] = device_locs[rid, evict[b, m]]
    if t == 0:
        miss_count[b] = total

ex15.check_miss_plan(write_miss_plan)

# exercise: 15-g
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

ex15.check_verify_capacity(verify_capacity_kernel)
