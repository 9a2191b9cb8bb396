# exercise: 00-a
from hisparse_numba.lessons import ex00

def pair_and_chunk(block, thread):
    return block * 8 + thread // 32, thread % 32

ex00.check_pair_and_chunk(pair_and_chunk)

# exercise: 00-b
def next_copy():
    # token 3 is resident in row 0: only token 5 moves, into the free row 1
    return np.array([5], dtype=np.int64), np.array([1], dtype=np.int64)

ex00.check_next_copy(next_copy)

# exercise: 00-c
nxt = copy_problem(state)
nxt["seq_lens"][0] = 14
nxt["top_k_tokens"][0] = [4, 12, 13]
nxt["host_cache_locs"][0] = np.arange(S)
nxt["host_cache_locs"][0, 13] = -1
print("before: tags", nxt["device_buffer_tokens"][0, :H].tolist(), " lru", nxt["lru_slots"][0].tolist())

def predict():
    # 13 is the newest (column H); 4 and 12 are in no hot slot: two misses. No slot holds a
    # selected position, so they take the two least recently used slots, 5 and 0, in lane order.
    # lru_slots: the unused slots in their old order, then the filled ones in miss order.
    return [5, 0], [3, 4, 2, 1, 5, 0]

ex00.check_misses(nxt, predict)
