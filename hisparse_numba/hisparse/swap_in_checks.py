"""The preconditions of the single-step swap-in (``swap_in.py``), checked before anything is written.

sglang's own checks come first, with its texts; then the checks it leaves out although breaking
them corrupts memory or state silently (``docs/hisparse-single-step.md#what-sglang-leaves-unchecked``).
Python types, shapes, dtypes and layouts are checked on the host. The values the kernel indexes
with are checked on the device in one pass (:func:`start_swap_in_check`: one launch of
:func:`swap_in_check_kernel`, one block per batch row, one 136-byte read-back that the launcher
awaits after enqueuing its gated kernel), so validation costs
no host copy of the tables and no memory that grows with ``seq_lens``;
:func:`swap_in_flags_reference` is the same verdict in NumPy. Only a rejected call reads the
offending row back, to say what is wrong with it. ``checks="shapes"`` skips the device pass.

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

Lessons 05, 07, 08 and 09 each teach one of the shape checks.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .. import device, value_flags
from ..checks import (FlagTally, agreed_rows, attach_check, check_block_size, check_dtype,
                      check_dtype_in, check_flag, check_inner_contiguous, check_int,
                      check_item_buffer, check_item_copy, check_miss_plan, check_mode, check_ndim,
                      check_no_overlap, claim_epoch, describe, fail, remember_host_checks,
                      require_array, row_stride, settle)
from ..device import cuda
from ..value_flags import CHECK_CONDITIONS, block_fill_dev, flag_bad_dev, report_value_dev
from .swap_in_hash import HASH_EMPTY, hash_find_dev, hash_insert_dev

MAX_SLOTS = 32767  # slot ids and lanes are int16
NUM_REAL, REQUEST, SELECTION, SLOT_STATE, MISS_SOURCE, HOT_LOCATION = range(6)
NUM_REAL_VALUE = CHECK_CONDITIONS - 1   # not a failure: its index carries num_real_reqs[0] back
CHECK_BLOCK = 32 if device.SIMULATOR else 1024  # a row's phases are latency-bound: more threads, fewer steps


class SwapInCall(NamedTuple):
    """One accepted single-step swap-in: the derived configuration and every array of the call.

    :func:`check_swap_in` builds it; ``swap_in.launch_unchecked`` launches it as it is. A lesson
    that shows what the kernel does with an input the check rejects builds one by hand (or
    ``_replace``s one field of an accepted call).
    """

    batch: int                 # rows of top_k_tokens: the grid
    num_real: int | None       # rows >= num_real are CUDA-graph padding (None: not read back,
    #                            checks="shapes" with a num_real_reqs array)
    num_top_k: int             # K
    hot_buffer_size: int       # H
    block_size: int
    record_plan: bool          # miss_src/miss_dst/miss_count given
    skip_io: bool              # plan and update tables, move no bytes
    item_size_bytes: int
    top_k_tokens: object
    device_buffer_tokens: object
    host_cache_locs: object
    device_buffer_locs: object
    host_cache: object
    device_buffer: object
    top_k_device_locs: object
    req_pool_indices: object
    seq_lens: object
    lru_slots: object
    num_real_reqs: object      # [1] int32 device array
    miss_src: object = None
    miss_dst: object = None
    miss_count: object = None
    gate: object = None        # the value check's flags (value_flags.start_check); None: always open
    pending: object = None     # that check's value_flags.ValueCheck until settle_swap_in takes its verdict


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
def reject_row_dev(flags, condition, row, s_row):
    """Flag ``condition`` for batch row ``row`` and mark the row rejected (``s_row[0] = 1``), so
    that the row's later checks, which assume the earlier ones passed, are skipped."""
    flag_bad_dev(flags, condition, row)
    s_row[0] = 1


@functools.cache
def swap_in_check_kernel(num_top_k: int, hot_buffer_size: int):
    """The one-pass value check for one (K, H): grid = batch rows, ``CHECK_BLOCK`` threads each.

    Shared memory per block: the ``2K``-entry position hash of the swap-in kernel, ``K`` int32
    hit counters and an ``H``-bit set of the LRU row's slots (44 KiB at K=2048, H=32767).
    """
    K, H, BS = num_top_k, hot_buffer_size, CHECK_BLOCK
    HASH_SIZE = 2 * K
    SLOT_WORDS = (H + 31) // 32

    @cuda.jit
    def kernel(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
               req_pool_indices, seq_lens, lru_slots, num_real_reqs, host_items, device_items,
               claims, epoch, flags):
        s_hash = cuda.shared.array(HASH_SIZE, np.int64)
        s_hits = cuda.shared.array(K, np.int32)          # slots holding each lane's position
        s_slots = cuda.shared.array(SLOT_WORDS, np.uint32)
        s_row = cuda.shared.array(2, np.int32)           # [0]: row is broken, [1]: newest lanes
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        num_real = num_real_reqs[0]
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

        p = tid
        while p < H:
            loc = device_buffer_locs[rid, p]
            if loc < 0 or loc >= device_items:
                flag_bad_dev(flags, HOT_LOCATION, b)
            elif cuda.atomic.exch(claims, loc, epoch) == epoch:
                flag_bad_dev(flags, HOT_LOCATION, b)
            p += BS

        if seq_len <= H:                                  # fast path: lanes below min(seq_len, K)
            i = tid
            while i < min(seq_len, K):
                if top_k_tokens[b, i] >= seq_len:
                    flag_bad_dev(flags, SELECTION, b)
                i += BS
            return

        newest = seq_len - 1
        block_fill_dev(s_hash, HASH_SIZE, HASH_EMPTY, tid, BS)
        block_fill_dev(s_hits, K, 0, tid, BS)
        block_fill_dev(s_slots, SLOT_WORDS, 0, tid, BS)
        if tid < 2:
            s_row[tid] = 0
        cuda.syncthreads()
        i = tid
        while i < K:
            t = top_k_tokens[b, i]
            if t < 0 or t >= seq_len:
                reject_row_dev(flags, SELECTION, b, s_row)
            elif t == newest:
                if cuda.atomic.add(s_row, 1, 1) > 0:
                    reject_row_dev(flags, SELECTION, b, s_row)
            elif not hash_insert_dev(s_hash, HASH_SIZE, t, i):
                reject_row_dev(flags, SELECTION, b, s_row)
            i += BS
        p = tid
        while p < H:
            slot = lru_slots[rid, p]
            if slot < 0 or slot >= H:
                reject_row_dev(flags, SLOT_STATE, b, s_row)
            else:
                bit = np.uint32(1) << np.uint32(slot % 32)
                if cuda.atomic.or_(s_slots, slot // 32, bit) & bit:
                    reject_row_dev(flags, SLOT_STATE, b, s_row)
            p += BS
        cuda.syncthreads()
        if s_row[0]:
            return

        p = tid
        while p < H:                                      # each selected position in one slot
            tag = device_buffer_tokens[rid, p]
            if tag >= 0 and tag != newest:
                lane = hash_find_dev(s_hash, HASH_SIZE, tag)
                if lane >= 0 and cuda.atomic.add(s_hits, lane, 1) > 0:
                    reject_row_dev(flags, SLOT_STATE, b, s_row)
            p += BS
        cuda.syncthreads()
        if s_row[0]:
            return

        i = tid
        while i < K:                                      # misses need a host row in the pool
            t = top_k_tokens[b, i]
            if t != newest and s_hits[i] == 0:
                if t >= host_cache_locs.shape[1]:
                    flag_bad_dev(flags, MISS_SOURCE, b)
                else:
                    src = host_cache_locs[rid, t]
                    if src < 0 or src >= host_items:
                        flag_bad_dev(flags, MISS_SOURCE, b)
            i += BS

    return kernel


def start_swap_in_check(call: SwapInCall) -> value_flags.ValueCheck:
    """Enqueue :func:`swap_in_check_kernel` on ``call`` (``value_flags.start_check``)."""
    item = call.item_size_bytes
    device_items = call.device_buffer.nbytes // item
    claims, epoch = claim_epoch(device_items)
    return value_flags.start_check(
        swap_in_check_kernel(call.num_top_k, call.hot_buffer_size), call.batch, CHECK_BLOCK,
        call.top_k_tokens, call.device_buffer_tokens, call.host_cache_locs, call.device_buffer_locs,
        call.req_pool_indices, call.seq_lens, call.lru_slots, call.num_real_reqs,
        np.int64(call.host_cache.nbytes // item), np.int64(device_items), claims, np.int32(epoch))


# ---------------------------------------------------------------------------------------------
# From a verdict to the ValueError (a rejected call only: reads the offending row back).

def raise_swap_in_flags(flags, call: SwapInCall) -> None:
    """The ``ValueError`` of the first failed condition, in the order of the conditions."""
    K, H, item = call.num_top_k, call.hot_buffer_size, call.item_size_bytes
    if flags[NUM_REAL][0]:
        fail(f"num_real_reqs[0] = {flags[NUM_REAL_VALUE][1]} must be in [0, batch={call.batch}]")
    failed = [c for c in (REQUEST, SELECTION, SLOT_STATE, MISS_SOURCE, HOT_LOCATION) if flags[c][0]]
    if not failed:
        return
    condition, b = failed[0], flags[failed[0]][1]

    def row(a, r, width=None):
        return device.to_host(a[r] if width is None else a[r, :width]).astype(np.int64)

    num_real = flags[NUM_REAL_VALUE][1]
    rids = device.to_host(call.req_pool_indices[:max(num_real, 0)]).astype(np.int64)
    if condition == HOT_LOCATION:
        _raise_hot_location(call, rids)
    rid, seq_len = int(rids[b]), int(device.to_host(call.seq_lens[b:b + 1])[0])
    requests = int(call.device_buffer_tokens.shape[0])
    if condition == REQUEST:
        if not 0 <= rid < requests:
            fail(f"req_pool_indices[{b}] = {rid} is outside [0, {requests}) (rows of device_buffer_tokens)")
        a = int(np.flatnonzero(rids[:b] == rid)[0])
        fail(f"req_pool_indices maps batch rows {a} and {b} to request row {rid}; each real batch row "
             "must own its request row (a long-path row updates its tags and LRU)")
    t = row(call.top_k_tokens, b)
    if condition == SELECTION:
        if seq_len < 0:
            fail(f"seq_lens[{b}] = {seq_len} is negative; a sequence length is >= 0")
        if seq_len <= H:
            lanes = t[:min(seq_len, K)]
            fail(f"top_k_tokens row {b} (fast path, seq_len {seq_len}) selects positions "
                 f"{lanes[lanes >= seq_len][:8].tolist()} >= seq_len; the fast path reads "
                 "device_buffer_locs[rid, position] unchecked")
        bad = t[(t < 0) | (t >= seq_len)]
        if bad.size:
            fail(f"top_k_tokens row {b} (long path, seq_len {seq_len} > hot_buffer_size {H}) holds positions "
                 f"{bad[:8].tolist()} outside [0, seq_len): every lane of a long-path row must be a valid position")
        values, counts = np.unique(t, return_counts=True)
        fail(f"top_k_tokens row {b} (long path) holds duplicate positions {values[counts > 1][:8].tolist()}: "
             "the positions of a long-path row must be distinct")
    newest = seq_len - 1
    tags = row(call.device_buffer_tokens, rid, H)
    if condition == SLOT_STATE:
        if not np.array_equal(np.sort(row(call.lru_slots, rid, H)), np.arange(H)):
            fail(f"lru_slots row {rid} is not a permutation of 0..{H - 1} (initialise it to arange(hot_buffer_size))")
        selected = tags[(tags >= 0) & (tags != newest) & np.isin(tags, t)]
        values, counts = np.unique(selected, return_counts=True)
        fail(f"device_buffer_tokens row {rid} holds positions {values[counts > 1][:8].tolist()} in more "
             "than one slot; a position may be resident in one slot only")
    missed = t[(t != newest) & ~np.isin(t, tags)]
    max_seq = int(call.host_cache_locs.shape[1])
    far = missed[missed >= max_seq]
    if far.size:
        fail(f"top_k_tokens row {b} (seq_lens[{b}] = {seq_len}) misses positions {far[:8].tolist()} "
             f"beyond host_cache_locs ({describe(call.host_cache_locs)})")
    src = device.to_host(call.host_cache_locs[rid]).astype(np.int64)[missed]
    if (src < 0).any():
        fail(f"top_k_tokens row {b} (seq_lens[{b}] = {seq_len}) misses positions {missed[src < 0][:8].tolist()} "
             "that have no host backup (host_cache_locs = -1); a position can be loaded only after its "
             "device-to-host backup")
    worst = int(np.argmax(src))
    fail(f"host_cache holds {call.host_cache.nbytes} bytes, but host_cache_locs[{rid}, {int(missed[worst])}] "
         f"= {int(src[worst])} needs item {int(src[worst])} of {item} bytes (a miss of top_k_tokens row {b})")


def _raise_hot_location(call: SwapInCall, rids) -> None:
    """The first hot slot (real rows in order) whose device row is outside the pool or taken."""
    H, item = call.hot_buffer_size, call.item_size_bytes
    device_items = call.device_buffer.nbytes // item
    owner = {}
    for rid in rids.tolist():
        if not 0 <= rid < call.device_buffer_tokens.shape[0]:
            continue
        for p, loc in enumerate(device.to_host(call.device_buffer_locs[rid, :H]).tolist()):
            if loc < 0:
                fail(f"device_buffer_locs[{rid}, {p}] = {loc} is negative; every hot slot needs a device "
                     "row >= 0 (a miss is copied into it)")
            if loc >= device_items:
                fail(f"device_buffer holds {call.device_buffer.nbytes} bytes, but device_buffer_locs[{rid}, {p}] "
                     f"= {loc} needs item {loc} of {item} bytes")
            if loc in owner:
                fail(f"device_buffer_locs[{owner[loc][0]}, {owner[loc][1]}] and device_buffer_locs[{rid}, {p}] "
                     f"are both device row {loc}; every hot slot needs a device row of its own "
                     "(two misses into one row race)")
            owner[loc] = (rid, p)
    raise AssertionError("the hot-location check failed but no slot reports it")


@functools.cache
def _all_rows_real(batch: int):
    """The ``[1]`` int32 device array ``[batch]`` used when the caller passes no num_real_reqs
    (one per batch size; kernels only read it)."""
    return device.to_device(np.array([batch], dtype=np.int32))


def _check_num_real_array(num_real_reqs) -> None:
    if isinstance(num_real_reqs, (int, np.integer)):
        fail(f"num_real_reqs must be a [1] int32 device array, got the Python value {num_real_reqs}")
    require_array("num_real_reqs", num_real_reqs)
    if num_real_reqs.ndim != 1 or num_real_reqs.shape[0] != 1 or np.dtype(num_real_reqs.dtype) != np.int32:
        fail(f"num_real_reqs must be an int32 array with shape [1], got {describe(num_real_reqs)}")


@remember_host_checks()
def swap_in_host_checks(*, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots, item_size_bytes,
        num_top_k, hot_buffer_size, page_size, block_size, num_real_reqs, miss_src, miss_dst,
        miss_count, skip_io) -> SwapInCall:
    """The host part of :func:`check_swap_in`: types, shapes, dtypes, layouts and scalars (no
    value inside an array); remembered for repeated calls on the same buffers."""
    arrays = dict(top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
                  host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
                  host_cache=host_cache, device_buffer=device_buffer,
                  top_k_device_locs=top_k_device_locs, req_pool_indices=req_pool_indices,
                  seq_lens=seq_lens, lru_slots=lru_slots)
    for name, a in arrays.items():
        require_array(name, a)
    plan = dict(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)
    for name, a in plan.items():
        if a is not None:
            require_array(name, a)
    if num_real_reqs is not None:
        _check_num_real_array(num_real_reqs)
    K, H = check_int("num_top_k", num_top_k), check_int("hot_buffer_size", hot_buffer_size)
    item = check_int("item_size_bytes", item_size_bytes)
    block = check_int("block_size", block_size)
    if check_int("page_size", page_size) < 1:
        fail(f"page_size must be >= 1, got {page_size}")
    skip = check_flag("skip_io", skip_io)

    if H < K:
        fail(f"hot_buffer_size ({hot_buffer_size}) must be >= num_top_k ({num_top_k})")
    check_ndim("top_k_tokens", top_k_tokens, 2, "[batch, num_top_k]")
    check_ndim("top_k_device_locs", top_k_device_locs, 2, "[batch, >= num_top_k]")
    check_ndim("req_pool_indices", req_pool_indices, 1, "[batch]")
    check_ndim("seq_lens", seq_lens, 1, "[batch]")
    batch = agreed_rows("batch", {"top_k_tokens": top_k_tokens, "top_k_device_locs": top_k_device_locs,
                                  "req_pool_indices": req_pool_indices, "seq_lens": seq_lens})
    record = check_miss_plan(
        miss_src, miss_dst, miss_count, batch=batch, capacity=K,
        shape_message=f"miss_src/miss_dst must have shape [batch, >= top_k] (capacity {K}).",
        count_message="miss_count must have shape [batch].")
    if K < 1 or H > MAX_SLOTS:
        fail(f"num_top_k must be >= 1 and hot_buffer_size <= {MAX_SLOTS} (slot ids are int16), "
             f"got num_top_k={K}, hot_buffer_size={H}")
    check_block_size(block)

    for name, a, dtype in (("top_k_tokens", top_k_tokens, np.int32),
                           ("top_k_device_locs", top_k_device_locs, np.int32),
                           ("device_buffer_tokens", device_buffer_tokens, np.int32),
                           ("device_buffer_locs", device_buffer_locs, np.int32),
                           ("host_cache_locs", host_cache_locs, np.int64),
                           ("lru_slots", lru_slots, np.int16)):
        check_dtype(name, a, dtype)
    check_dtype_in("req_pool_indices", req_pool_indices, (np.int32, np.int64))
    check_dtype_in("seq_lens", seq_lens, (np.int32, np.int64))

    if top_k_tokens.shape[1] != K:
        fail(f"num_top_k ({K}) must match top_k_tokens.shape[1] ({top_k_tokens.shape[1]}); "
             f"pass top_k_tokens[:, :{K}] to use the first {K} columns")
    if top_k_device_locs.shape[1] < K:
        fail(f"top_k_device_locs must have shape [batch={batch}, >= num_top_k={K}], "
             f"got {describe(top_k_device_locs)}")
    check_ndim("device_buffer_tokens", device_buffer_tokens, 2, "[requests, >= hot_buffer_size + 1]")
    check_ndim("device_buffer_locs", device_buffer_locs, 2, "[requests, >= hot_buffer_size + 1]")
    check_ndim("lru_slots", lru_slots, 2, "[requests, >= hot_buffer_size]")
    check_ndim("host_cache_locs", host_cache_locs, 2, "[requests, max_sequence]")
    requests = agreed_rows("request rows", {
        "device_buffer_tokens": device_buffer_tokens, "device_buffer_locs": device_buffer_locs,
        "lru_slots": lru_slots, "host_cache_locs": host_cache_locs})
    if device_buffer_tokens.shape[1] < H:
        fail(f"device_buffer_tokens must have shape [requests, >= hot_buffer_size + 1] "
             f"(hot_buffer_size {H}), got {describe(device_buffer_tokens)}")
    if device_buffer_locs.shape[1] < H + 1:
        fail(f"device_buffer_locs must have shape [requests={requests}, >= hot_buffer_size + 1 = {H + 1}] "
             f"(column {H} holds the newest token's row), got {describe(device_buffer_locs)}")
    if requests > 1 and row_stride(device_buffer_locs) != row_stride(device_buffer_tokens):
        fail(f"device_buffer_locs row stride ({row_stride(device_buffer_locs)} elements) must equal "
             f"device_buffer_tokens row stride ({row_stride(device_buffer_tokens)} elements): "
             "sglang indexes both tables with the tags' stride, so a different shape reads wrong rows")
    if lru_slots.shape[1] < H:
        fail(f"lru_slots must have shape [requests={requests}, >= hot_buffer_size={H}], got {describe(lru_slots)}")
    if not host_cache_locs.flags.c_contiguous:
        fail(f"host_cache_locs must be C-contiguous: sglang uses shape[1] as its row stride, "
             f"got {describe(host_cache_locs)} with strides {tuple(host_cache_locs.strides)} bytes")
    for name, a in (("top_k_tokens", top_k_tokens), ("top_k_device_locs", top_k_device_locs),
                    ("device_buffer_tokens", device_buffer_tokens),
                    ("device_buffer_locs", device_buffer_locs), ("lru_slots", lru_slots)):
        check_inner_contiguous(name, a)
    check_item_copy(item, host_cache, device_buffer)
    check_item_buffer("host_cache", host_cache, item, -1)
    check_item_buffer("device_buffer", device_buffer, item, -1)
    written = {"top_k_device_locs": top_k_device_locs, "device_buffer_tokens": device_buffer_tokens,
               "lru_slots": lru_slots, **plan}
    if not skip:
        written["device_buffer"] = device_buffer
    check_no_overlap(written, {**arrays, "num_real_reqs": num_real_reqs})

    num_real = batch if num_real_reqs is None else None
    call = SwapInCall(
        batch=batch, num_real=num_real, num_top_k=K, hot_buffer_size=H, block_size=block,
        record_plan=record, skip_io=skip, item_size_bytes=item,
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
        host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs, host_cache=host_cache,
        device_buffer=device_buffer, top_k_device_locs=top_k_device_locs,
        req_pool_indices=req_pool_indices, seq_lens=seq_lens, lru_slots=lru_slots,
        num_real_reqs=_all_rows_real(batch) if num_real_reqs is None else num_real_reqs,
        miss_src=miss_src if record else None,
        miss_dst=miss_dst if record else None, miss_count=miss_count if record else None)
    return call


def check_swap_in(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
                  device_buffer, top_k_device_locs, req_pool_indices, seq_lens, lru_slots,
                  item_size_bytes, num_top_k, hot_buffer_size, page_size=1, block_size=256,
                  num_real_reqs=None, miss_src=None, miss_dst=None, miss_count=None,
                  skip_io=False, checks="full", defer=False) -> SwapInCall:
    """Every precondition of the single-step swap-in, checked before anything is written.

    Takes the launcher's arguments, in its order (``page_size`` is unused, as in sglang), so that
    ``check_swap_in(**problem)`` works on a problem of ``hisparse.examples``.

    sglang's own checks come first, with its texts; then the checks sglang omits although a
    violation corrupts memory or state silently
    (``docs/hisparse-single-step.md#what-sglang-leaves-unchecked``). With ``checks="full"`` (the
    default) the values are checked on the device (see the module docstring); ``"shapes"`` skips
    that pass. Returns the accepted call for :func:`swap_in.launch_unchecked`.

    ``defer=True`` (the public launcher) returns as soon as the device pass is enqueued: the call
    then carries its ``gate`` and ``pending`` check, the launcher enqueues the gated kernel and
    :func:`settle_swap_in` takes the verdict (and raises) afterwards, so the stream never waits.
    """
    full = check_mode(checks)
    call = swap_in_host_checks(
        top_k_tokens=top_k_tokens, device_buffer_tokens=device_buffer_tokens,
        host_cache_locs=host_cache_locs, device_buffer_locs=device_buffer_locs,
        host_cache=host_cache, device_buffer=device_buffer, top_k_device_locs=top_k_device_locs,
        req_pool_indices=req_pool_indices, seq_lens=seq_lens, lru_slots=lru_slots,
        item_size_bytes=item_size_bytes, num_top_k=num_top_k, hot_buffer_size=hot_buffer_size,
        page_size=page_size, block_size=block_size, num_real_reqs=num_real_reqs,
        miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count, skip_io=skip_io)
    if full and call.batch:
        call = attach_check(call, start_swap_in_check(call), settle_swap_in, defer)
    return call


def settle_swap_in(call: SwapInCall) -> SwapInCall:
    """Wait for ``call``'s device value check: raise its ``ValueError``, or return the call with
    ``num_real`` read back. A call without a pending check is returned as it is."""
    return settle(call, raise_swap_in_flags, NUM_REAL_VALUE)
