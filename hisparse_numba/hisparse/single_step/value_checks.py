"""The single-step swap-in's value checks: every value the kernel indexes with, on the device in
one pass (``value_flags``: one launch, one small read-back, the kernel gated on the verdict).

``swap_in_check_kernel`` runs one block per batch row; ``swap_in_flags_reference`` is the same
verdict in NumPy (the oracle of the tests). ``checks`` turns a verdict into the ValueError
and holds the host checks. Lessons 01, 08 and 13 show what these checks prevent.

The value conditions, per real batch row ``b`` (each flag's index is the row):

* ``NUM_REAL``: ``num_real_reqs[0]`` outside ``[0, batch]``;
* ``REQUEST``: ``req_pool_indices[b]`` outside the request rows, or equal to an earlier real row's;
* ``SELECTION``: ``seq_lens[b] < 0``; a fast-path lane ``i < min(seq_len, K)`` selecting a position
  ``>= seq_len``; a long-path lane outside ``[0, seq_len)``, or a long-path position selected twice;
* ``SLOT_STATE`` (long path): ``lru_slots`` row not a permutation of ``0..H-1``, or a selected
  position resident in two slots;
* ``MISS_SOURCE`` (long path): a miss past ``host_cache_locs``' width, without host backup (``< 0``),
  or past the host pool;
* ``HOT_LOCATION``: a hot slot's device row (``device_buffer_locs[rid, :H]``) outside the device
  pool, or shared with another hot slot of any real row (two misses into one row race).
"""

from __future__ import annotations

import functools

import numpy as np

from ... import device, value_flags
from ...checks import FlagTally
from ...device import cuda, jit_kernel
from ...value_flags import (CHECK_CONDITIONS, block_fill_dev, claim_epoch_dev, finish_check_dev,
                           flag_bad_dev, report_value_dev)
from .call import SwapInCall
from .hash import HASH_EMPTY, hash_find_dev, hash_insert_dev

NUM_REAL, REQUEST, SELECTION, SLOT_STATE, MISS_SOURCE, HOT_LOCATION = range(6)
NUM_REAL_VALUE = CHECK_CONDITIONS - 1   # not a failure: its index carries num_real_reqs[0] back
CHECK_BLOCK = 32 if device.SIMULATOR else 1024  # a row's phases are latency-bound: more threads, fewer steps


# ---------------------------------------------------------------------------------------------
# The value check: NumPy reference first, then the kernel.

def swap_in_flags_reference(call: SwapInCall) -> list:
    """The verdict of :func:`swap_in_check_kernel` on a call of NumPy arrays: ``[(count, first
    row), ...]`` per condition, as ``value_flags.check_flags`` returns it. Rows whose request row or
    ``seq_len`` is invalid are not checked further; long rows with a bad selection or slot state
    are not checked for misses (as in the kernel). The first row of ``HOT_LOCATION`` may differ
    on the device when the flag is for a shared device row (whichever claim came second)."""
    K, H = call.num_top_k, call.hot_buffer_size
    tokens, tags = np.asarray(call.top_k_tokens), np.asarray(call.device_buffer_tokens)
    all_locs, lru_rows = np.asarray(call.device_buffer_locs), np.asarray(call.lru_slots)
    host_locs = np.asarray(call.host_cache_locs)
    rids, lens = np.asarray(call.req_pool_indices), np.asarray(call.seq_lens)
    host_items = call.host_cache.nbytes // call.item_size_bytes
    device_items = call.device_buffer.nbytes // call.item_size_bytes
    requests, max_seq = tags.shape[0], host_locs.shape[1]
    tally = FlagTally()
    flag, count, first = tally.flag, tally.count, tally.first

    num_real = call.num_real if call.num_real is not None else int(np.asarray(call.num_real_reqs)[0])
    count[NUM_REAL_VALUE], first[NUM_REAL_VALUE] = 1, num_real
    if not 0 <= num_real <= call.batch:
        flag(NUM_REAL, 0)
    claimed = []
    for b in range(min(max(num_real, 0), call.batch)):
        rid, seq_len = int(rids[b]), int(lens[b])
        valid_rid = 0 <= rid < requests
        flag(REQUEST, b, not valid_rid or rid in rids[:b].tolist())
        flag(SELECTION, b, seq_len < 0)
        if not valid_rid or seq_len < 0:
            continue
        locs = all_locs[rid, :H].astype(np.int64)
        outside = (locs < 0) | (locs >= device_items)
        flag(HOT_LOCATION, b, outside.sum())
        claimed.append(locs[~outside])
        t = tokens[b].astype(np.int64)
        if seq_len <= H:
            flag(SELECTION, b, (t[:min(seq_len, K)] >= seq_len).sum())
            continue
        newest = seq_len - 1
        bad_lane = (t < 0) | (t >= seq_len)
        repeats = (~bad_lane).sum() - np.unique(t[~bad_lane]).size
        flag(SELECTION, b, bad_lane.sum() + repeats)
        lru = lru_rows[rid, :H].astype(np.int64)
        not_slot = (lru < 0) | (lru >= H)
        slot_repeats = (~not_slot).sum() - np.unique(lru[~not_slot]).size
        flag(SLOT_STATE, b, not_slot.sum() + slot_repeats)
        if bad_lane.any() or repeats or not_slot.any() or slot_repeats:
            continue
        row_tags = tags[rid, :H].astype(np.int64)
        selected = row_tags[(row_tags >= 0) & (row_tags != newest) & np.isin(row_tags, t)]
        resident_twice = selected.size - np.unique(selected).size
        flag(SLOT_STATE, b, resident_twice)
        if resident_twice:
            continue
        missed = t[(t != newest) & ~np.isin(t, row_tags)]
        far = missed >= max_seq
        src = host_locs[rid, missed[~far]]
        flag(MISS_SOURCE, b, far.sum() + ((src < 0) | (src >= host_items)).sum())
    if claimed:
        locs = np.concatenate(claimed)
        _, where, seen = np.unique(locs, return_index=True, return_counts=True)
        if (seen > 1).any():
            rows = np.repeat(np.arange(len(claimed)), [c.size for c in claimed])
            flag(HOT_LOCATION, int(rows[np.setdiff1d(np.arange(locs.size), where)].min()),
                 locs.size - where.size)
    return tally.verdict()


@cuda.jit(device=True, inline=True)
def reject_row_dev(flags, condition, row, s_row, phase):
    """Flag ``condition`` for batch row ``row`` and mark the row rejected in ``phase``'s word
    (``s_row[phase] = 1``), so that the row's later checks, which assume the earlier ones passed,
    are skipped. Each phase has its own word: a thread that has left a barrier may reject in the
    next phase while another still reads the word of the previous one."""
    flag_bad_dev(flags, condition, row)
    s_row[phase] = 1


@cuda.jit(device=True, inline=True)
def row_rejected_dev(s_row, phase):
    """After a barrier that ends ``phase``: did any thread reject the row in it?"""
    cuda.syncthreads()
    return s_row[phase] != 0


@functools.cache
def long_row_check(num_top_k: int, hot_buffer_size: int):
    """The long path of :func:`swap_in_check_kernel`'s row (``seq_len > H``), for one (K, H): every
    lane a distinct position below ``seq_len`` (the newest at most once), the LRU row a permutation,
    each selected position in at most one hot slot, and a host row in the pool for every miss. It
    reads the values the row's threads loaded into registers (``lanes``, ``slots``, ``tags``,
    ``sources``); shared memory: the ``2K``-entry position hash, ``K`` hit counters, an ``H``-bit
    set of the LRU row's slots."""
    K, H, BS = num_top_k, hot_buffer_size, CHECK_BLOCK
    HASH_SIZE = 2 * K
    SLOT_WORDS = (H + 31) // 32
    SLOTS_PER_THREAD = (H + BS - 1) // BS
    LANES_PER_THREAD = (K + BS - 1) // BS

    @cuda.jit(device=True, inline=True)
    def long_row_dev(lanes, slots, tags, sources, seq_len, b, tid, host_cache_locs, host_items, flags):
        s_hash = cuda.shared.array(HASH_SIZE, np.int64)
        s_hits = cuda.shared.array(K, np.int32)          # slots holding each lane's position
        s_slots = cuda.shared.array(SLOT_WORDS, np.uint32)
        s_row = cuda.shared.array(3, np.int32)   # [0], [2]: broken in phase 1 / 2; [1]: newest lanes
        newest = seq_len - 1
        block_fill_dev(s_hash, HASH_SIZE, HASH_EMPTY, tid, BS)
        block_fill_dev(s_hits, K, 0, tid, BS)
        block_fill_dev(s_slots, SLOT_WORDS, 0, tid, BS)
        if tid < 3:
            s_row[tid] = 0
        cuda.syncthreads()
        for j in range(LANES_PER_THREAD):
            i = tid + j * BS
            if i < K:
                t = lanes[j]
                if t < 0 or t >= seq_len:
                    reject_row_dev(flags, SELECTION, b, s_row, 0)
                elif t == newest:
                    if cuda.atomic.add(s_row, 1, 1) > 0:
                        reject_row_dev(flags, SELECTION, b, s_row, 0)
                elif not hash_insert_dev(s_hash, HASH_SIZE, t, i):
                    reject_row_dev(flags, SELECTION, b, s_row, 0)
        for j in range(SLOTS_PER_THREAD):
            if tid + j * BS < H:
                slot = slots[j]
                if slot < 0 or slot >= H:
                    reject_row_dev(flags, SLOT_STATE, b, s_row, 0)
                else:
                    bit = np.uint32(1) << np.uint32(slot % 32)
                    if cuda.atomic.or_(s_slots, slot // 32, bit) & bit:
                        reject_row_dev(flags, SLOT_STATE, b, s_row, 0)
        if row_rejected_dev(s_row, 0):
            return

        for j in range(SLOTS_PER_THREAD):               # each selected position in one slot
            tag = tags[j]
            if tid + j * BS < H and tag >= 0 and tag != newest:
                lane = hash_find_dev(s_hash, HASH_SIZE, tag)
                if lane >= 0 and cuda.atomic.add(s_hits, lane, 1) > 0:
                    reject_row_dev(flags, SLOT_STATE, b, s_row, 2)
        if row_rejected_dev(s_row, 2):
            return

        for j in range(LANES_PER_THREAD):               # misses need a host row in the pool
            i = tid + j * BS
            if i < K:
                t = lanes[j]
                if t != newest and s_hits[i] == 0:
                    if t >= host_cache_locs.shape[1] or sources[j] < 0 or sources[j] >= host_items:
                        flag_bad_dev(flags, MISS_SOURCE, b)

    return long_row_dev


@functools.cache
def swap_in_check_kernel(num_top_k: int, hot_buffer_size: int):
    """The one-pass value check for one (K, H): grid = batch rows, ``CHECK_BLOCK`` threads each.

    The pass is latency-bound (a few KiB per row), so each thread first loads every element of the
    row it will judge (its hot slots' device rows, LRU entries and tags, its lanes' positions and
    their host rows) into registers, all loads in flight at once, and issues its claims before it
    reads any of their answers; the phases after that read only registers and shared memory.

    Shared memory per block: the ``2K``-entry position hash of the swap-in kernel, ``K`` int32
    hit counters and an ``H``-bit set of the LRU row's slots (44 KiB at K=2048, H=32767).
    """
    K, H, BS = num_top_k, hot_buffer_size, CHECK_BLOCK
    SLOTS_PER_THREAD = (H + BS - 1) // BS
    LANES_PER_THREAD = (K + BS - 1) // BS
    long_row_dev = long_row_check(K, H)

    @cuda.jit(device=True, inline=True)
    def check_row_dev(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                      req_pool_indices, seq_lens, lru_slots, num_real_reqs, host_items, device_items,
                      claims, flags):
        locs = cuda.local.array(SLOTS_PER_THREAD, np.int64)   # this thread's slots p = tid + j * BS
        slots = cuda.local.array(SLOTS_PER_THREAD, np.int64)
        tags = cuda.local.array(SLOTS_PER_THREAD, np.int64)
        claimed = cuda.local.array(SLOTS_PER_THREAD, np.int32)
        lanes = cuda.local.array(LANES_PER_THREAD, np.int64)  # this thread's lanes i = tid + j * BS
        sources = cuda.local.array(LANES_PER_THREAD, np.int64)
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        num_real = num_real_reqs[0]
        epoch = claim_epoch_dev(flags)
        if b == 0 and tid == 0:
            report_value_dev(flags, NUM_REAL_VALUE, num_real)
            if num_real < 0 or num_real > top_k_tokens.shape[0]:
                flag_bad_dev(flags, NUM_REAL, 0)
        if b >= num_real:
            return
        rid = req_pool_indices[b]
        seq_len = seq_lens[b]
        if tid == 0:
            if rid < 0 or rid >= device_buffer_tokens.shape[0]:
                flag_bad_dev(flags, REQUEST, b)
            if seq_len < 0:
                flag_bad_dev(flags, SELECTION, b)
        if rid < 0 or rid >= device_buffer_tokens.shape[0] or seq_len < 0:
            return
        e = tid
        while e < b:                                      # an earlier real row with this request
            if req_pool_indices[e] == rid:
                flag_bad_dev(flags, REQUEST, b)
            e += BS

        for j in range(SLOTS_PER_THREAD):
            p = tid + j * BS
            if p < H:
                locs[j] = device_buffer_locs[rid, p]
                slots[j] = lru_slots[rid, p]
                tags[j] = device_buffer_tokens[rid, p]
        for j in range(LANES_PER_THREAD):
            i = tid + j * BS
            if i < K:
                lanes[j] = top_k_tokens[b, i]
        for j in range(LANES_PER_THREAD):               # host rows of in-range lanes, for misses
            i = tid + j * BS
            if seq_len > H and i < K and lanes[j] >= 0 and lanes[j] < host_cache_locs.shape[1]:
                sources[j] = host_cache_locs[rid, lanes[j]]

        for j in range(SLOTS_PER_THREAD):               # every claim in flight before any answer
            p = tid + j * BS
            if p < H and locs[j] >= 0 and locs[j] < device_items:
                claimed[j] = cuda.atomic.exch(claims, locs[j], epoch)
        for j in range(SLOTS_PER_THREAD):
            p = tid + j * BS
            if p < H:
                if locs[j] < 0 or locs[j] >= device_items or claimed[j] == epoch:
                    flag_bad_dev(flags, HOT_LOCATION, b)

        if seq_len <= H:                                  # fast path: lanes below min(seq_len, K)
            for j in range(LANES_PER_THREAD):
                i = tid + j * BS
                if i < min(seq_len, K) and lanes[j] >= seq_len:
                    flag_bad_dev(flags, SELECTION, b)
            return

        long_row_dev(lanes, slots, tags, sources, seq_len, b, tid, host_cache_locs, host_items, flags)

    @jit_kernel(max_threads=BS)
    def kernel(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
               req_pool_indices, seq_lens, lru_slots, num_real_reqs, host_items, device_items,
               claims, flags, verdict):
        check_row_dev(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                      req_pool_indices, seq_lens, lru_slots, num_real_reqs, host_items, device_items,
                      claims, flags)
        finish_check_dev(flags, verdict)

    return kernel


def start_swap_in_check(call: SwapInCall) -> value_flags.ValueCheck:
    """Enqueue :func:`swap_in_check_kernel` on ``call`` (``value_flags.start_check``)."""
    item = call.item_size_bytes
    device_items = call.device_buffer.nbytes // item
    claims = value_flags.claim_table(device_items)
    return value_flags.start_check(
        swap_in_check_kernel(call.num_top_k, call.hot_buffer_size), call.batch, CHECK_BLOCK,
        call.top_k_tokens, call.device_buffer_tokens, call.host_cache_locs, call.device_buffer_locs,
        call.req_pool_indices, call.seq_lens, call.lru_slots, call.num_real_reqs,
        np.int64(call.host_cache.nbytes // item), np.int64(device_items), claims)
