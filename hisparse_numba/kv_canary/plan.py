"""kv-canary plan: turn one forward batch into a VerifyPlan and a WritePlan.

For each batch row ``r`` (request ``rp = req_pool_indices[r]``; ``rp == 0`` is a padding row):

* verify entries: positions ``[window_start, prefix_len)`` of the request, where
  ``window_start = max(prefix_len - W, 0)`` for an SWA window ``W > 0`` and 0 otherwise. Entry
  ``(slot, expected_token, position, prev_slot)`` with ``slot = LUT(req_to_token[rp, pos])``,
  ``prev_slot = LUT(req_to_token[rp, pos - 1])`` (``-1`` at position 0: the chain head; an SWA
  window does not reset the chain) and ``expected_token = pool[rp, pos + offset]`` when
  ``0 <= pos + offset < min(valid_lens[r], pool width)``, else ``-1``.
* write metadata: ``write_offsets`` = exclusive prefix sum of ``max(extend_len, 0)``, the total at
  ``write_offsets[bs]``, zeros after it; the seed slot ``LUT(req_to_token[rp, prefix_len - 1])``
  (the position index clamped to the row width) when the row has a prefix and writes something,
  else ``-1``; ``write_num_valid_reqs = bs`` (padding rows included).
* overflow: ``verify_num_valid = min(total, capacity)``; ``enable = total <= capacity``. On
  overflow no entry is written (the arrays keep what they held).

Before anything is written, ``plan_checks`` checks the values the kernels index with
(``checks="full"``); the public launcher runs that check inside the offsets kernel.

LUT translation leaves negative slots as they are and clamps the others to ``lut_len - 1`` (sglang's
kernels clamp; its torch reference raises instead: here both sides clamp, so they stay identical).

Launch geometry (``launch_canary_plan_kernels``):

1. offsets kernel: ONE block (1024 threads on a GPU, 64 in the simulator) covers up to
   ``PLAN_BS_BLOCK_SIZE = 4096`` rows. With ``checks="full"`` it first checks every row's values
   (``plan_checks``) and ends that check as every check kernel does (``value_flags``); a
   rejected call's block then stops before writing, and the entries kernel finds its gate
   closed. Each thread owns a contiguous chunk of rows; a block scan over the per-thread sums
   (``blockscan.py``) gives the exclusive verify and write offsets. It writes a verify-offsets
   scratch ``[bs + 1]`` (total at ``[bs]``) and every WritePlan field, ``verify_num_valid`` and
   ``enable``.
2. entries kernel: a grid-stride loop over flat entries ``[0, total)``; each entry finds its row
   by binary search over the scratch offsets. It returns at once when ``enable == 0``.

Read top-down: the plan types (``plan_types``), the NumPy reference, the kernels, the launchers
(``launch_unchecked(call)`` launches a ``CanaryPlanCall`` that ``check_canary_plan`` accepted, in
``plan_checks.py``; ``launch_canary_plan_kernels`` is the two together). The behaviour reproduced
is described in ``docs/kv-canary-behaviour.md#plan``. Lessons: 02 (verify capacity), 12 (capacity and SWA).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import device, value_flags
from ..checks import CANARY_PREFIX, check_mode, launch_then_settle
from ..blockscan import block_exclusive_scan_dev
from ..device import cuda, xp
from ..value_flags import check_rejected_dev, finish_check_dev, gate_closed_dev
from . import plan_checks
from .plan_checks import (CanaryPlanCall, canary_plan_host_checks, check_canary_plan, plan_value_check_dev,
                          settle_canary_plan)


# ---------------------------------------------------------------------------------------------
# The NumPy reference (the oracle).


def _lut_ref(raw: int, lut) -> int:
    if lut is None or raw < 0:
        return raw
    return int(lut[min(raw, lut.shape[0] - 1)])


def launch_canary_plan_kernels_reference(*, verify_plan_out, write_plan_out, req_pool_indices,
                                         prefix_lens, extend_seq_lens, req_to_token, swa_window_size,
                                         full_to_swa_index_mapping, verify_capacity,
                                         req_to_verify_expected_tokens,
                                         req_to_verify_expected_tokens_valid_lens,
                                         kv_token_id_vs_position_offset) -> None:
    """Fill the two plans in place from NumPy inputs (same keywords as the launcher)."""
    check_canary_plan(
        verify_plan_out=verify_plan_out, write_plan_out=write_plan_out,
        req_pool_indices=req_pool_indices, prefix_lens=prefix_lens, extend_seq_lens=extend_seq_lens,
        req_to_token=req_to_token, swa_window_size=swa_window_size,
        full_to_swa_index_mapping=full_to_swa_index_mapping, verify_capacity=verify_capacity,
        req_to_verify_expected_tokens=req_to_verify_expected_tokens,
        req_to_verify_expected_tokens_valid_lens=req_to_verify_expected_tokens_valid_lens,
        kv_token_id_vs_position_offset=kv_token_id_vs_position_offset,
        fn="launch_canary_plan_kernels_reference", on_device=False)
    window = int(swa_window_size)
    lut = full_to_swa_index_mapping
    pool = req_to_verify_expected_tokens
    offset = int(kv_token_id_vs_position_offset)
    bs = req_pool_indices.shape[0]
    max_seq_len = req_to_token.shape[1]

    entries = []  # (slot, expected_token, position, prev_slot)
    write_lens = []
    seeds = []
    for r in range(bs):
        rp = int(req_pool_indices[r])
        prefix, extend = int(prefix_lens[r]), int(extend_seq_lens[r])
        if rp == 0:  # padding row
            write_lens.append(0)
            seeds.append(-1)
            continue
        start = max(prefix - window, 0) if window > 0 else 0
        bound = -1
        if pool is not None:
            bound = min(int(req_to_verify_expected_tokens_valid_lens[r]), pool.shape[1])
        for pos in range(start, prefix):
            slot = _lut_ref(int(req_to_token[rp, pos]), lut)
            prev = _lut_ref(int(req_to_token[rp, pos - 1]), lut) if pos > 0 else -1
            col = pos + offset
            token = int(pool[rp, col]) if 0 <= col < bound else -1
            entries.append((slot, token, pos, prev))
        write_lens.append(max(extend, 0))
        if prefix > 0 and extend > 0:
            seeds.append(_lut_ref(int(req_to_token[rp, min(prefix - 1, max_seq_len - 1)]), lut))
        else:
            seeds.append(-1)

    total = len(entries)
    cap = int(verify_capacity)
    if 0 < total <= cap:
        cols = np.array(entries, dtype=np.int64).T
        verify_plan_out.verify_slot_indices[:total] = cols[0]
        verify_plan_out.verify_expected_tokens[:total] = cols[1]
        verify_plan_out.verify_expected_positions[:total] = cols[2]
        verify_plan_out.verify_prev_slot_indices[:total] = cols[3]
    verify_plan_out.verify_num_valid[0] = min(total, cap)
    verify_plan_out.enable[0] = 1 if total <= cap else 0

    offsets = np.zeros(write_plan_out.write_offsets.shape[0], dtype=np.int64)
    offsets[1:bs + 1] = np.cumsum(np.array(write_lens, dtype=np.int64))
    write_plan_out.write_offsets[:] = offsets
    write_plan_out.write_seed_slot_indices[:bs] = np.array(seeds, dtype=np.int64)
    write_plan_out.write_num_valid_reqs[0] = bs


# ---------------------------------------------------------------------------------------------
# Kernels.


@cuda.jit(device=True, inline=True)
def _lut_dev(raw, lut, lut_len):
    """SWA translation: negative slots pass through, others are clamped to the table."""
    if lut_len == 0 or raw < 0:
        return raw
    return lut[min(raw, lut_len - 1)]


@cuda.jit(device=True, inline=True)
def _row_lens_dev(r, req_pool_indices, prefix_lens, extend_seq_lens, window):
    """(window_start, verify_len, write_len) of batch row ``r``; zeros for a padding row."""
    if req_pool_indices[r] == 0:
        return 0, 0, 0
    prefix = prefix_lens[r]
    start = 0
    if window > 0:
        start = max(prefix - window, 0)
    return start, max(prefix - start, 0), max(extend_seq_lens[r], 0)


@functools.cache
def _offsets_kernel(threads: int, checked: bool):
    """The single-block offsets kernel for a block of ``threads`` (a power of two) threads.

    ``checked``: the kernel also runs the call's value check first (``plan_checks``; one block
    sees every row, so the check needs no launch of its own) and takes the check's ``flags`` and
    ``verdict``; otherwise it takes the ``gate`` of a check that ran before it.
    """

    @cuda.jit(device=True, inline=True)
    def offsets_dev(req_pool_indices, prefix_lens, extend_seq_lens, req_to_token, lut, lut_len, window,
                    verify_capacity, scratch, verify_num_valid, enable, write_offsets,
                    write_seed_slot_indices, write_num_valid_reqs):
        vsum = cuda.shared.array(threads, dtype=np.int64)
        wsum = cuda.shared.array(threads, dtype=np.int64)
        t = cuda.threadIdx.x
        bs = req_pool_indices.shape[0]
        chunk = (bs + threads - 1) // threads
        first = t * chunk
        last = min(first + chunk, bs)

        v_local = 0
        w_local = 0
        r = first
        while r < last:
            _, vlen, wlen = _row_lens_dev(r, req_pool_indices, prefix_lens, extend_seq_lens, window)
            v_local += vlen
            w_local += wlen
            r += 1
        v_off, total_v = block_exclusive_scan_dev(vsum, v_local, t, threads)
        w_off, total_w = block_exclusive_scan_dev(wsum, w_local, t, threads)
        max_seq_len = req_to_token.shape[1]
        r = first
        while r < last:
            _, vlen, wlen = _row_lens_dev(r, req_pool_indices, prefix_lens, extend_seq_lens, window)
            scratch[r] = v_off
            write_offsets[r] = w_off
            v_off += vlen
            w_off += wlen
            seed = -1
            prefix = prefix_lens[r]
            if wlen > 0 and prefix > 0:  # wlen > 0 implies an active row
                raw = req_to_token[req_pool_indices[r], min(prefix - 1, max_seq_len - 1)]
                seed = _lut_dev(np.int64(raw), lut, lut_len)
            write_seed_slot_indices[r] = seed
            r += 1

        if t == 0:
            scratch[bs] = total_v
            write_offsets[bs] = total_w
            write_num_valid_reqs[0] = bs
            if total_v > verify_capacity:
                verify_num_valid[0] = verify_capacity
                enable[0] = 0
            else:
                verify_num_valid[0] = total_v
                enable[0] = 1
        i = bs + 1 + t
        while i < write_offsets.shape[0]:
            write_offsets[i] = 0
            i += threads

    if checked:
        @cuda.jit
        def canary_plan_checked_offsets_kernel(req_pool_indices, prefix_lens, extend_seq_lens, req_to_token,
                                               lut, lut_len, window, verify_capacity, scratch,
                                               verify_num_valid, enable, write_offsets,
                                               write_seed_slot_indices, write_num_valid_reqs, max_reqs,
                                               max_seq_len, pool_rows, flags, verdict):
            plan_value_check_dev(req_pool_indices, prefix_lens, extend_seq_lens, max_reqs, max_seq_len,
                                 pool_rows, flags)
            finish_check_dev(flags, verdict)
            cuda.syncthreads()             # the block's verdict (in the gate view) is visible to all
            if check_rejected_dev(flags):
                return
            offsets_dev(req_pool_indices, prefix_lens, extend_seq_lens, req_to_token, lut, lut_len, window,
                        verify_capacity, scratch, verify_num_valid, enable, write_offsets,
                        write_seed_slot_indices, write_num_valid_reqs)

        return canary_plan_checked_offsets_kernel

    @cuda.jit
    def canary_plan_offsets_kernel(req_pool_indices, prefix_lens, extend_seq_lens, req_to_token, lut,
                                   lut_len, window, verify_capacity, scratch, verify_num_valid, enable,
                                   write_offsets, write_seed_slot_indices, write_num_valid_reqs, gate):
        if gate_closed_dev(gate):      # the call's value check rejected it
            return
        offsets_dev(req_pool_indices, prefix_lens, extend_seq_lens, req_to_token, lut, lut_len, window,
                    verify_capacity, scratch, verify_num_valid, enable, write_offsets,
                    write_seed_slot_indices, write_num_valid_reqs)

    return canary_plan_offsets_kernel


@cuda.jit
def canary_plan_entries_kernel(scratch, enable, verify_capacity, req_pool_indices, prefix_lens,
                               extend_seq_lens, req_to_token, lut, lut_len, window, pool, valid_lens,
                               has_pool, offset, verify_slot_indices, verify_expected_tokens,
                               verify_expected_positions, verify_prev_slot_indices, gate):
    if gate_closed_dev(gate):      # the call's value check rejected it
        return
    bs = req_pool_indices.shape[0]
    total = scratch[bs]
    if total <= 0 or enable[0] == 0 or total > verify_capacity:
        return
    pool_cols = pool.shape[1]
    k = cuda.grid(1)
    stride = cuda.gridsize(1)
    while k < total:
        lo = 0  # the largest row r with scratch[r] <= k (empty rows are never chosen)
        hi = bs - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if scratch[mid] <= k:
                lo = mid
            else:
                hi = mid - 1
        r = lo
        rp = req_pool_indices[r]
        start, _, _ = _row_lens_dev(r, req_pool_indices, prefix_lens, extend_seq_lens, window)
        pos = start + (k - scratch[r])
        slot = _lut_dev(np.int64(req_to_token[rp, pos]), lut, lut_len)
        prev = np.int64(-1)
        if pos > 0:
            prev = _lut_dev(np.int64(req_to_token[rp, pos - 1]), lut, lut_len)
        token = np.int64(-1)
        if has_pool != 0:
            col = pos + offset
            if col >= 0 and col < min(valid_lens[r], pool_cols):
                token = np.int64(pool[rp, col])
        verify_slot_indices[k] = slot
        verify_expected_tokens[k] = token
        verify_expected_positions[k] = pos
        verify_prev_slot_indices[k] = prev
        k += stride


def _offsets_threads() -> int:
    return 64 if device.SIMULATOR else 1024


def _entries_geometry(capacity: int) -> tuple[int, int]:
    threads = 64 if device.SIMULATOR else 128
    max_blocks = 2 if device.SIMULATOR else 1024
    return max(1, min(max_blocks, -(-capacity // threads))), threads


@functools.cache
def _placeholders(backend: str):
    """Stand-ins for an absent LUT and pool (allocated once, so that a call copies nothing)."""
    return xp.zeros(1, dtype=np.int64), xp.zeros((1, 1), dtype=np.int32), xp.zeros(1, dtype=np.int64)


@functools.lru_cache(maxsize=8)
def _scratch(bs: int):
    """The offsets kernel's ``[bs + 1]`` int64 output, read by the entries kernel of the same
    call (kernels on one stream run in order, so calls of one size share it)."""
    return xp.empty(bs + 1, dtype=np.int64)


def _kernel_arguments(call: CanaryPlanCall) -> tuple:
    """The offsets kernel's arguments, then the entries kernel's (placeholders for an absent LUT
    or pool)."""
    bs = call.bs
    lut = call.full_to_swa_index_mapping
    lut_len = 0 if lut is None else int(lut.shape[0])
    no_lut, no_pool, no_valid_lens = _placeholders(device.backend())
    if lut is None:
        lut = no_lut
    pool = call.req_to_verify_expected_tokens
    has_pool = 0 if pool is None else 1
    valid_lens = call.req_to_verify_expected_tokens_valid_lens
    if pool is None:
        pool, valid_lens = no_pool, no_valid_lens  # never read: has_pool == 0
    vp, wp = call.verify_plan_out, call.write_plan_out
    window, cap = call.swa_window_size, call.verify_capacity
    scratch = _scratch(bs)
    offsets = (call.req_pool_indices, call.prefix_lens, call.extend_seq_lens, call.req_to_token, lut, lut_len,
               window, cap, scratch, vp.verify_num_valid, vp.enable, wp.write_offsets,
               wp.write_seed_slot_indices, wp.write_num_valid_reqs)
    entries = (scratch, vp.enable, cap, call.req_pool_indices, call.prefix_lens, call.extend_seq_lens,
               call.req_to_token, lut, lut_len, window, pool, valid_lens, has_pool,
               call.kv_token_id_vs_position_offset, vp.verify_slot_indices, vp.verify_expected_tokens,
               vp.verify_expected_positions, vp.verify_prev_slot_indices)
    return offsets, entries


def _launch_entries(call: CanaryPlanCall, entries: tuple) -> None:
    if call.bs == 0:
        return
    blocks, threads = _entries_geometry(call.verify_capacity)
    device.launch(canary_plan_entries_kernel, blocks, threads, *entries,
                  value_flags.open_gate() if call.gate is None else call.gate)


def launch_unchecked(call: CanaryPlanCall) -> None:
    """Launch the two plan kernels on ``call`` as it is: no checks.

    ``call`` comes from :func:`check_canary_plan`, or is an accepted call with one field replaced,
    in a lesson that shows what an unchecked input does.
    """
    offsets, entries = _kernel_arguments(call)
    threads = _offsets_threads()
    device.launch(_offsets_kernel(threads, False), 1, threads, *offsets,
                  value_flags.open_gate() if call.gate is None else call.gate)
    _launch_entries(call, entries)


def _launch_checked(call: CanaryPlanCall) -> CanaryPlanCall:
    """The public launcher's path with value checks: the offsets kernel runs the check first
    (``value_flags.start_check``), the entries kernel waits behind its gate; then the verdict."""
    offsets, entries = _kernel_arguments(call)
    threads = _offsets_threads()
    check = value_flags.start_check(_offsets_kernel(threads, True), 1, threads, *offsets,
                                    *plan_checks.value_arguments(call)[3:])
    call = call._replace(gate=check.gate, pending=check)
    return launch_then_settle(call, lambda c: _launch_entries(c, entries), settle_canary_plan)


def launch_canary_plan_kernels(*, verify_plan_out, write_plan_out, req_pool_indices, prefix_lens,
                               extend_seq_lens, req_to_token, swa_window_size, full_to_swa_index_mapping,
                               verify_capacity, req_to_verify_expected_tokens,
                               req_to_verify_expected_tokens_valid_lens,
                               kv_token_id_vs_position_offset, checks: str = "full") -> None:
    """Fill ``verify_plan_out`` and ``write_plan_out`` on the device (two launches).

    Inputs: ``req_pool_indices``, ``prefix_lens``, ``extend_seq_lens`` ``[bs]`` int64 (bs <= 4096 and
    <= the WritePlan's capacity); ``req_to_token`` ``[max_reqs, max_seq_len]`` int32, C-contiguous;
    ``full_to_swa_index_mapping`` ``[n]`` int64 or None (required when ``swa_window_size > 0``);
    ``verify_capacity`` must equal ``verify_plan_out.verify_slot_indices.shape[0]``; the expected
    token pool ``[rows, cols]`` int32 or None, with ``valid_lens [bs]`` int64 (required with the
    pool). Every active row (``rp != 0``) needs ``0 < rp < max_reqs`` (and ``< rows`` of the pool)
    and ``prefix_len + max(extend_len, 0) <= max_seq_len`` (``plan_checks``).

    ``checks="full"`` (default) checks those values on the device first, inside the offsets kernel
    (two launches in all); the host then waits for that kernel's verdict in pinned memory (the
    call's only host synchronisation), not for the entries kernel.
    ``checks="shapes"`` skips them, for a caller that validated the batch upstream; a bad value
    then reads out of bounds.
    """
    values = check_mode(checks, prefix=CANARY_PREFIX)
    call = canary_plan_host_checks(
        verify_plan_out=verify_plan_out, write_plan_out=write_plan_out,
        req_pool_indices=req_pool_indices, prefix_lens=prefix_lens, extend_seq_lens=extend_seq_lens,
        req_to_token=req_to_token, swa_window_size=swa_window_size,
        full_to_swa_index_mapping=full_to_swa_index_mapping, verify_capacity=verify_capacity,
        req_to_verify_expected_tokens=req_to_verify_expected_tokens,
        req_to_verify_expected_tokens_valid_lens=req_to_verify_expected_tokens_valid_lens,
        kv_token_id_vs_position_offset=kv_token_id_vs_position_offset)
    if values and call.bs > 0:
        _launch_checked(call)       # the check inside the offsets kernel, then the verdict
    else:
        launch_unchecked(call)
