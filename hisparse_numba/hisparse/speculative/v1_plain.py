"""Version 1, the plain rung: the reference's stages on the GPU, in order, one block per request.

What it changes from ``reference.py``: the same stages, with the same names, as a kernel whose
every choice is the reference's order (a block scan over consecutive occurrences, one thread's
loop, or atomic.min of an index), so that each stage reads beside its reference twin. Grid
``batch`` x ``tile_threads(T)`` threads (up to 1024 on a GPU, 32 in the simulator), a barrier
after every stage; the gather's stages are here, the commit's in ``v1_commit.py``. Shared: each
unique miss's victim and walk position (``MAX_OCCURRENCES`` int16 each) and the scan, 36 KiB.
Global ``PlainWorkspace`` rows: each occurrence's table position, each position's first
occurrence, the copy list. ``dbt``, ``dbl``, ``hcl``: ``device_buffer_tokens``,
``device_buffer_locs``, ``host_cache_locs``; ``metadata``: ``scratch_state`` as int64 words (row
``rid + 1``: table from word 0, index from word ``T``; compact entries from int32 column ``4T``).
Lessons 01, 03, 04 and 08 show this rung first.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ... import device, value_flags
from ...arguments import derived_argument, int64_view
from ...blockscan import block_exclusive_scan_dev
from ...device import cuda, jit_kernel
from ...itemcopy import copy_item_dev
from ...value_flags import gate_closed_dev
from ..limits import MAX_OCCURRENCES
from ..miss_plan import placeholder_plan
from .device_fns import (HOT, LANES, MAX_THREADS, MISS, NO_OCCURRENCE, classify_dev,
                         table_find_dev, table_insert_dev)
from .hash import MASK32, hash_insert_dev, thread_range_dev
from .tiling import forget_aborted_call, tile_threads
from .state import COUNT_GEN, clock_bits_dev, next_epoch_dev, next_sigma_dev
from .v1_commit import (DEGRADED, UNION_HITS, admission_stage_dev, evictions_stage_dev,
                        finish_stage_dev, victims_stage_dev)


@jit_kernel(max_threads=MAX_THREADS)
def plain_kernel(tokens, seq_lens, dbt, dbl, hcl, host_words, dev_words, out, req_pool_indices,
                 num_real_reqs, cache_index, cache_policy, scratch_locs, scratch_state, metadata,
                 miss_src, miss_dst, miss_count, pos, first, copy_src, copy_dst, words_per_item,
                 record, gate):
    b, tid, nthreads = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
    steps, top_k, hot = tokens.shape[1], tokens.shape[2], cache_policy.shape[1]
    t, n, cap = steps * top_k, scratch_locs.shape[0], scratch_locs.shape[1]
    if gate_closed_dev(gate):       # the call's value check rejected it
        return
    if b >= num_real_reqs[0]:       # a padded row
        for occ in range(tid, t, nthreads):
            out[b, occ // top_k, occ % top_k] = 0
        if record and tid == 0:
            miss_count[b] = 0
        return
    victims = cuda.shared.array(MAX_OCCURRENCES, np.int16)   # per unique miss: its slot, -1 none
    walk = cuda.shared.array(MAX_OCCURRENCES, np.int16)  # approximate walks, then the hash's items
    scan = cuda.shared.array(MAX_THREADS, np.int32)
    flags = cuda.shared.array(3, np.int32)               # DEGRADED, ROUND, UNION_HITS
    no_cells = cuda.shared.array(1, np.int32)            # no settle table: the hash rounds race
    rid = req_pool_indices[b]
    row = rid + 1
    cbits, ebits = clock_bits_dev(hot)
    packed = np.int64(cache_policy[0, rid])
    e_now = next_epoch_dev(packed, cbits, ebits)
    cursor = (packed & MASK32) & ((1 << cbits) - 1)
    gen = np.int64(scratch_state[0, COUNT_GEN * n + rid])
    degraded, sigma = gen < 0, next_sigma_dev(gen)
    if tid == 0:
        flags[DEGRADED] = 0
        flags[UNION_HITS] = 0
    cuda.syncthreads()
    # classify: outputs of invalid, tail and hot occurrences, stamps (the distinct ones counted),
    # scratch-table inserts of the missed tokens (pos = 0 marks a miss until count)
    for occ in range(tid, t, nthreads):
        first[b, occ] = NO_OCCURRENCE
        pos[b, occ] = -1
        kind, value, tok = classify_dev(tokens, seq_lens, dbt, dbl, hcl, cache_index, b, rid, occ,
                                        top_k, steps, hot, dbt.shape[1] - hot, degraded)
        if kind == MISS:
            table_insert_dev(metadata, row, t, sigma, tok)
            pos[b, occ] = 0
        else:
            if kind == HOT:
                if cuda.atomic.exch(cache_policy, (row, value), np.int32(e_now)) != e_now:
                    cuda.atomic.add(flags, UNION_HITS, 1)
                value = dbl[rid, value]
            out[b, occ // top_k, occ % top_k] = value
    cuda.syncthreads()
    # count: each miss's table position, its token's first occurrence (the smallest), then a scan
    # of the first occurrences over consecutive occurrences per thread: rank u and total m
    for occ in range(tid, t, nthreads):
        if pos[b, occ] >= 0:
            p = table_find_dev(metadata, row, t, sigma, tokens[b, occ // top_k, occ % top_k])
            pos[b, occ] = p
            cuda.atomic.min(first, (b, p), occ)
    cuda.syncthreads()
    o0, o1 = thread_range_dev(t, tid, nthreads)
    firsts = 0
    for occ in range(o0, o1):
        if pos[b, occ] >= 0 and first[b, pos[b, occ]] == occ:
            firsts += 1
    u, m = block_exclusive_scan_dev(scan, firsts, tid, nthreads)
    # number: unique_idx u of each first occurrence: index and compact entries, its output
    # (scratch location, or -2 - u for direct overflow) and its copy into the scratch location
    for occ in range(o0, o1):
        p = pos[b, occ]
        if p >= 0 and first[b, p] == occ:
            metadata[row, t + p] = (sigma << 32) | u
            scratch_state[row, 4 * t + u] = p
            loc = scratch_locs[rid, u] if u < cap else -2 - u
            out[b, occ // top_k, occ % top_k] = loc
            copied = u < cap and loc >= 0
            copy_src[b, u] = hcl[rid, tokens[b, occ // top_k, occ % top_k]] if copied else -1
            copy_dst[b, u] = loc if copied else -1
            u += 1
    cuda.syncthreads()
    # duplicates: a later occurrence of a missed token outputs its first occurrence's location
    for occ in range(tid, t, nthreads):
        f = first[b, pos[b, occ]] if pos[b, occ] >= 0 else occ
        if f != occ:
            out[b, occ // top_k, occ % top_k] = out[b, f // top_k, f % top_k]
    # admission: the mode; in approximate mode the claims and admissions
    union_hits = flags[UNION_HITS]
    union_mode = m + union_hits <= hot
    if not union_mode:
        admission_stage_dev(tokens, seq_lens, dbt, dbl, hcl, cache_index, cache_policy,
                            scratch_state, metadata, pos, scan, b, rid, t, m, cap, union_hits,
                            e_now, degraded, tid, nthreads)
    # victims
    victims_stage_dev(cache_policy, scratch_state, scratch_locs, victims, walk, flags, rid, m, t,
                      union_mode, cursor, e_now, (1 << ebits) - 1, tid, nthreads)
    # evictions
    evictions_stage_dev(cache_index, dbt, dbl, hcl, scratch_locs, scratch_state, metadata, victims,
                        copy_src, copy_dst, b, rid, m, t, sigma, tid, nthreads)
    # hash: the slots that took a miss, in unique_idx order (victims[u], -1: none)
    hash_insert_dev(cache_index, rid, dbt, victims, m, walk, flags, scan, no_cells, tid, nthreads,
                    False)
    # finish
    finish_stage_dev(out, cache_policy, scratch_state, metadata, miss_src, miss_dst, miss_count,
                     copy_src, copy_dst, b, rid, n, m, t, cap, sigma, e_now, cursor, cbits,
                     degraded or flags[DEGRADED] != 0, record, tid, nthreads)
    # copy: one warp per copied miss, host -> device
    for u in range(tid // LANES, m, nthreads // LANES):
        if copy_dst[b, u] >= 0:
            copy_item_dev(host_words, copy_src[b, u], dev_words, copy_dst[b, u], words_per_item,
                          tid % LANES, LANES)


class PlainWorkspace(NamedTuple):
    """The plain kernel's global rows, ``[batch, T]`` each; a launch writes all it reads."""

    pos: object         # int32, per occurrence: a miss's table position, -1 for the others
    first: object       # int32, per table position: its token's first occurrence
    copy_src: object    # int64, per unique miss: host location (-1: not copied)
    copy_dst: object    # int32, per unique miss: device location (-1: not copied)


@functools.lru_cache(maxsize=8)
def workspace(batch: int, num_occurrences: int) -> PlainWorkspace:
    xp, shape = device.xp, (batch, num_occurrences)
    return PlainWorkspace(xp.empty(shape, dtype=xp.int32), xp.empty(shape, dtype=xp.int32),
                          xp.empty(shape, dtype=xp.int64), xp.empty(shape, dtype=xp.int32))


def launch(call) -> None:
    """Launch a checked ``SpecCall`` (``launch.launch_unchecked(call, version=1)``)."""
    t = call.steps * call.top_k
    plan = (call.miss_src, call.miss_dst, call.miss_count) if call.record else placeholder_plan()
    state = call.state
    try:
        device.launch(plain_kernel, call.batch, tile_threads(t), call.top_k_tokens, call.seq_lens,
                      call.device_buffer_tokens, call.device_buffer_locs, call.host_cache_locs,
                      derived_argument("words", call.host_cache, device.byte_words),
                      derived_argument("words", call.device_buffer, device.byte_words),
                      call.top_k_device_locs, call.req_pool_indices, call.num_real_reqs,
                      state.cache_index, state.cache_policy, state.scratch_locs, state.scratch_state,
                      derived_argument("int64", state.scratch_state, int64_view), *plan,
                      *workspace(call.batch, t), call.item_size_bytes // 8, int(call.record),
                      value_flags.open_gate() if call.gate is None else call.gate)
    except Exception:
        forget_aborted_call(call)   # only the simulator raises inside a kernel (a bad index)
        raise
