# Solutions of lesson 16: each section is the solved exercise cell, checker call included.

# exercise: 16-a
@cuda.jit
def hit_stage(top_k_tokens, slot_tags, newest, hit_lane):
    s_hash = cuda.shared.array(HASH_SIZE, np.int64)     # the hash of the selected positions
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    K, H = top_k_tokens.shape[0], slot_tags.shape[0]
    block_fill_dev(s_hash, HASH_SIZE, HASH_EMPTY, tid, threads)
    cuda.syncthreads()
    for lane in range(tid, K, threads):
        position = top_k_tokens[lane]
        if position != newest:                           # the newest is served from column H
            hash_insert_dev(s_hash, HASH_SIZE, position, lane)
    cuda.syncthreads()
    for p in range(tid, H, threads):
        tag = slot_tags[p]
        hit_lane[p] = hash_find_dev(s_hash, HASH_SIZE, tag) if tag >= 0 else -1


ex16.check_hit_stage(hit_stage);
