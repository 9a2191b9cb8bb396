"""Right and plausibly wrong answers to lesson 16's exercise (the hit stage through a hash), for
tests/lessons/test_ex16.py."""

import numpy as np

from hisparse_numba.device import cuda
from hisparse_numba.hisparse.single_step.hash import HASH_EMPTY, hash_find_dev, hash_insert_dev
from hisparse_numba.lessons.ex16 import HASH_SIZE
from hisparse_numba.value_flags import block_fill_dev


@cuda.jit
def stub(top_k_tokens, slot_tags, newest, hit_lane):
    s_hash = cuda.shared.array(HASH_SIZE, np.int64)
    raise NotImplementedError("empty the hash, insert the lanes, look the slots up (about 12 lines)")


@cuda.jit
def hashed(top_k_tokens, slot_tags, newest, hit_lane):
    s_hash = cuda.shared.array(HASH_SIZE, np.int64)
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    block_fill_dev(s_hash, HASH_SIZE, HASH_EMPTY, tid, threads)
    cuda.syncthreads()
    for lane in range(tid, top_k_tokens.shape[0], threads):
        if top_k_tokens[lane] != newest:
            hash_insert_dev(s_hash, HASH_SIZE, top_k_tokens[lane], lane)
    cuda.syncthreads()
    for p in range(tid, slot_tags.shape[0], threads):
        tag = slot_tags[p]
        hit_lane[p] = hash_find_dev(s_hash, HASH_SIZE, tag) if tag >= 0 else -1


@cuda.jit
def hashed_with_the_newest(top_k_tokens, slot_tags, newest, hit_lane):
    s_hash = cuda.shared.array(HASH_SIZE, np.int64)
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    block_fill_dev(s_hash, HASH_SIZE, HASH_EMPTY, tid, threads)
    cuda.syncthreads()
    for lane in range(tid, top_k_tokens.shape[0], threads):
        hash_insert_dev(s_hash, HASH_SIZE, top_k_tokens[lane], lane)
    cuda.syncthreads()
    for p in range(tid, slot_tags.shape[0], threads):
        tag = slot_tags[p]
        hit_lane[p] = hash_find_dev(s_hash, HASH_SIZE, tag) if tag >= 0 else -1


@cuda.jit
def hashed_one_slot_per_thread(top_k_tokens, slot_tags, newest, hit_lane):
    s_hash = cuda.shared.array(HASH_SIZE, np.int64)
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    block_fill_dev(s_hash, HASH_SIZE, HASH_EMPTY, tid, threads)
    cuda.syncthreads()
    for lane in range(tid, top_k_tokens.shape[0], threads):
        if top_k_tokens[lane] != newest:
            hash_insert_dev(s_hash, HASH_SIZE, top_k_tokens[lane], lane)
    cuda.syncthreads()
    p = tid
    if p < slot_tags.shape[0]:
        tag = slot_tags[p]
        hit_lane[p] = hash_find_dev(s_hash, HASH_SIZE, tag) if tag >= 0 else -1


@cuda.jit
def hashed_without_a_barrier(top_k_tokens, slot_tags, newest, hit_lane):
    s_hash = cuda.shared.array(HASH_SIZE, np.int64)
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    block_fill_dev(s_hash, HASH_SIZE, HASH_EMPTY, tid, threads)
    cuda.syncthreads()
    for lane in range(tid, top_k_tokens.shape[0], threads):
        if top_k_tokens[lane] != newest:
            hash_insert_dev(s_hash, HASH_SIZE, top_k_tokens[lane], lane)
    for p in range(tid, slot_tags.shape[0], threads):
        tag = slot_tags[p]
        hit_lane[p] = hash_find_dev(s_hash, HASH_SIZE, tag) if tag >= 0 else -1


@cuda.jit
def scanned(top_k_tokens, slot_tags, newest, hit_lane):
    for p in range(cuda.threadIdx.x, slot_tags.shape[0], cuda.blockDim.x):
        tag = slot_tags[p]
        lane = -1
        if tag >= 0 and tag != newest:
            for i in range(top_k_tokens.shape[0]):
                if top_k_tokens[i] == tag:
                    lane = i
        hit_lane[p] = lane
