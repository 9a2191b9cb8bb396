# Solutions to lesson 14's kernel puzzles: each section is the solved exercise cell.

# exercise: 14-a
@cuda.jit
def gather_words(src_words, dst_words, src_locs, dst_locs, words_per_item):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x     # this thread's word of all the pairs
    if i < src_locs.shape[0] * words_per_item:      # not `i < 12`: the checker tries other sizes
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
@cuda.jit
def hit_rows(tags, locs, top_k, seq_lens, num_real, hot_buffer_size, rows):
    r = cuda.blockIdx.x                  # one block per request row
    k = cuda.threadIdx.x                 # this thread's first lane
    while k < top_k.shape[1]:
        row = -1
        if r < num_real:                 # a padding row reads nothing
            pos = top_k[r, k]
            if pos == seq_lens[r] - 1:
                row = locs[r, hot_buffer_size]           # the newest token's column
            else:
                for s in range(hot_buffer_size):
                    if tags[r, s] == pos:
                        row = locs[r, s]
                        break
        rows[r, k] = row
        k += cuda.blockDim.x             # more lanes than threads: the next lane of this thread

ex14.check_hit_test(hit_rows)

# exercise: 14-d
from hisparse_numba.kv_canary.hashing import splitmix64_dev

@cuda.jit(device=True, inline=True)
def mix3_dev(prev_hash, token, position):
    acc = splitmix64_dev(np.uint64(prev_hash))
    acc = splitmix64_dev(acc ^ np.uint64(token))       # int64 ^ uint64 would not be a uint64
    return splitmix64_dev(acc ^ np.uint64(position))

ex14.check_chain_step(mix3_dev)

# exercise: 14-e
from hisparse_numba.hisparse.single_step.hash import HASH_EMPTY, HASH_MULTIPLIER

@cuda.jit(device=True, inline=True)
def hash_find_dev(table, size, key):
    h = ((np.int64(key) * HASH_MULTIPLIER) & 0xFFFFFFFF) % size     # Knuth's home entry
    while True:
        entry = table[h]
        if entry == HASH_EMPTY:          # an empty entry ends the probe: the key is absent
            return -1
        if (entry >> 16) == key:
            return entry & 0xFFFF
        h += 1
        if h == size:                    # wrap around the end of the table
            h = 0

ex14.check_hash_probe(hash_find_dev)

# exercise: 14-f
from hisparse_numba.lessons.ex14 import sample_position_dev

@cuda.jit
def pick_victims(ref, cursor, e_now, miss_count, ebits, victims):
    r = cuda.blockIdx.x
    hot = ref.shape[1]
    mask = (1 << ebits) - 1
    i = cuda.threadIdx.x
    while i < miss_count[r]:
        best = -1
        best_age = -1
        for sample in range(6):
            position = sample_position_dev(i, sample, miss_count[r], hot)
            if position < 0:
                break
            slot = (cursor[r] + position) % hot
            if ref[r, slot] != e_now[r]:                     # stamped this call: not a victim
                age = (e_now[r] - ref[r, slot]) & mask       # epochs wrap at 2^ebits
                if age > best_age:                           # > keeps the first on a tie
                    best = slot
                    best_age = age
        victims[r, i] = best
        i += cuda.blockDim.x

ex14.check_clock_victim(pick_victims)
