"""kv-canary write: stamp this step's tokens into the canary buffer, continuing each chain.

Row ``r < min(write_num_valid_reqs, R)`` of the WritePlan owns flat entries
``[write_offsets[r], write_offsets[r + 1])`` of ``input_ids``, ``positions`` and ``out_cache_loc``.
The chain starts at ``H(anchor)`` when ``write_seed_slot_indices[r] < 0``, else at
``mix3(seed.prev_hash, seed.token, seed.position)`` read from the seed's canary row. For each entry
with ``slot = out_cache_loc[i] >= 0`` (negative: skipped, no chain advance, not counted):

* optional input assert (``enable_write_input_assert``): token/position differ from the expected
  tensors -> a violation with WRITE_TOKEN_MISMATCH / WRITE_POSITION_MISMATCH bits;
* chain-position assert (seed >= 0 and ``enable_chain_position_assert[0] != 0``): position must be
  the previous one + 1 (starting from the seed's stored position) -> WRITE_POSITION_MISMATCH;
* store ``(token, position, running_hash, real_kv_hash)``, then ``running_hash = mix3(running_hash,
  token, position)``: the chain advances on the actual inputs even after a violation.

``kernel_run_counter += 1`` on every call, ``slot_run_counter += slots written``.

Launch geometry: one thread per plan row (a chain is serial): ``ceil(R / 32)`` blocks of 32 threads
(one warp per block spreads the chains over many SMs). Each thread adds its written count with one
atomic. Violation rows
of different requests land in the ring in a racy order (see ``context``); rows of one request keep
their order.

Within one launch the live slots (``out_cache_loc >= 0``) must be pairwise distinct and none of
them a row's seed slot (sglang's allocator guarantees this and sglang does not check it): if two
rows wrote one slot, the GPU result would be a race between threads. ``write_checks`` rejects such
calls (and slots, seeds or row ranges out of bounds) before anything is written, unless the caller
passes ``checks="shapes"``. A clamping SWA LUT (``plan``) that maps several full slots to its last
entry produces such duplicates.

Read top-down: the row store both use (``store_canary_row``), the NumPy reference, the kernel,
the launchers (``launch_unchecked(call)`` launches a :class:`CanaryWriteCall` that
``check_canary_write`` in ``write_checks`` accepted; ``launch_canary_write_kernel`` is the two
together). The behaviour reproduced is described in
``docs/kv-canary-behaviour.md#write``. Lessons: 12 (capacity and SWA), 13 (capstone).
"""

from __future__ import annotations

import numpy as np

from .. import device, value_flags
from ..checks import launch_then_settle
from ..device import cuda
from ..value_flags import gate_closed_dev
from .context import (VerifyOrWriteContext, append_violations_reference, canary_fields, fold_real_kv_dev,
                      fold_real_kv_reference, host_sources, record_violation_dev, source_arguments)
from .hashing import (CHAIN_HEAD_HASH, CANARY_FIELD_POSITION, CANARY_FIELD_PREV_HASH,
                      CANARY_FIELD_REAL_KV_HASH, CANARY_FIELD_TOKEN, FailReason, as_int64_dev, mix3, mix3_dev,
                      slot_hash_dev, to_signed64)
from .plan_types import WritePlan
from .write_checks import CanaryWriteCall, check_canary_write, settle_canary_write

_WRITE_TOKEN = int(FailReason.WRITE_TOKEN_MISMATCH)
_WRITE_POSITION = int(FailReason.WRITE_POSITION_MISMATCH)


def store_canary_row(buf, slot, token, position, prev_hash, real_kv_hash):
    """Stamp canary row ``slot`` (the hashes as signed int64). The reference calls it, the kernel
    ``store_canary_row_dev``."""
    buf[slot, CANARY_FIELD_TOKEN] = token
    buf[slot, CANARY_FIELD_POSITION] = position
    buf[slot, CANARY_FIELD_PREV_HASH] = prev_hash
    buf[slot, CANARY_FIELD_REAL_KV_HASH] = real_kv_hash


store_canary_row_dev = cuda.jit(device=True, inline=True)(store_canary_row)


def launch_canary_write_kernel_reference(*, context: VerifyOrWriteContext, plan: WritePlan, input_ids,
                                         positions, out_cache_loc, enable_write_input_assert: bool,
                                         expected_input_tokens, expected_input_positions) -> None:
    """NumPy twin of :func:`launch_canary_write_kernel`: mutates the context's arrays in place."""
    check_canary_write(context=context, plan=plan, input_ids=input_ids, positions=positions,
                       out_cache_loc=out_cache_loc, enable_write_input_assert=enable_write_input_assert,
                       expected_input_tokens=expected_input_tokens,
                       expected_input_positions=expected_input_positions, on_device=False)
    ctx = context
    ctx.kernel_run_counter[:1] += 1  # an array add wraps as the device's atomic does
    active = max(0, min(int(plan.write_num_valid_reqs[0]), plan.write_seed_slot_indices.shape[0]))
    buf = canary_fields(ctx.canary_buf)
    chain_assert_flag = ctx.enable_chain_position_assert is not None and int(ctx.enable_chain_position_assert[0]) != 0
    sources = host_sources(ctx)
    kind = int(ctx.kernel_kind)
    rows, written = [], 0
    for r in range(active):
        start, end = int(plan.write_offsets[r]), int(plan.write_offsets[r + 1])
        if end <= start:
            continue
        seed = int(plan.write_seed_slot_indices[r])
        h = CHAIN_HEAD_HASH if seed < 0 else mix3(buf[seed, CANARY_FIELD_PREV_HASH],
                                                  buf[seed, CANARY_FIELD_TOKEN], buf[seed, CANARY_FIELD_POSITION])
        chain_assert = seed >= 0 and chain_assert_flag
        last_pos = int(buf[seed, CANARY_FIELD_POSITION]) if chain_assert else 0
        for i in range(start, end):
            slot = int(out_cache_loc[i])
            if slot < 0:
                continue
            tok, pos = int(input_ids[i]), int(positions[i])
            rk = fold_real_kv_reference(ctx, slot, sources)
            if enable_write_input_assert:
                exp_tok, exp_pos = int(expected_input_tokens[i]), int(expected_input_positions[i])
                bits = (_WRITE_TOKEN if tok != exp_tok else 0) | (_WRITE_POSITION if pos != exp_pos else 0)
                if bits:
                    rows.append([kind, slot, pos, tok, exp_tok, to_signed64(h), exp_pos, bits])
            if chain_assert:
                want = to_signed64(last_pos + 1)    # int64 wraps, as on the device
                if pos != want:
                    rows.append([kind, slot, pos, tok, tok, to_signed64(h), want, _WRITE_POSITION])
                last_pos = pos
            store_canary_row(buf, slot, tok, pos, to_signed64(h), to_signed64(rk))
            h = mix3(h, tok, pos)
            written += 1
    ctx.slot_run_counter[:1] += written
    append_violations_reference(ctx, ctx.violation_ring, ctx.violation_write_index, rows)


@cuda.jit
def canary_write_kernel(buf, write_offsets, seeds, num_valid_reqs, input_ids, positions, out_cache_loc,
                        kind, input_assert, expected_tokens, expected_positions, ring, write_index,
                        slot_run_counter, kernel_run_counter, chain_assert_flag, src0, src1, src2, src3,
                        src_params, num_sources, gate):
    if gate_closed_dev(gate):      # the call's value check rejected it
        return
    r = cuda.grid(1)
    if r == 0:
        cuda.atomic.add(kernel_run_counter, 0, 1)
    active = min(np.int64(num_valid_reqs[0]), seeds.shape[0])
    if r >= active:
        return
    start = write_offsets[r]
    end = write_offsets[r + 1]
    if end <= start:
        return
    seed = seeds[r]
    h = slot_hash_dev(buf, seed)
    chain_assert = seed >= 0 and chain_assert_flag[0] != 0
    last_pos = np.int64(0)
    if chain_assert:
        last_pos = buf[seed, CANARY_FIELD_POSITION]
    written = np.int64(0)
    i = start
    while i < end:
        slot = out_cache_loc[i]
        if slot >= 0:
            tok = input_ids[i]
            pos = positions[i]
            rk = fold_real_kv_dev(src0, src1, src2, src3, src_params, num_sources, slot)
            if input_assert != 0:
                exp_tok = expected_tokens[i]
                exp_pos = expected_positions[i]
                bits = 0
                if tok != exp_tok:
                    bits |= _WRITE_TOKEN
                if pos != exp_pos:
                    bits |= _WRITE_POSITION
                if bits != 0:
                    record_violation_dev(ring, write_index, kind, slot, pos, tok, exp_tok, as_int64_dev(h),
                                            exp_pos, bits)
            if chain_assert:
                if pos != last_pos + 1:
                    record_violation_dev(ring, write_index, kind, slot, pos, tok, tok, as_int64_dev(h),
                                            last_pos + 1, _WRITE_POSITION)
                last_pos = pos
            store_canary_row_dev(buf, slot, tok, pos, as_int64_dev(h), as_int64_dev(rk))
            h = mix3_dev(h, tok, pos)
            written += 1
        i += 1
    if written > 0:
        cuda.atomic.add(slot_run_counter, 0, written)


def _write_geometry(rows: int) -> tuple[int, int]:
    threads = 32  # one warp per block spreads the serial chains over more SMs
    return max(1, -(-rows // threads)), threads


def launch_unchecked(call: CanaryWriteCall) -> None:
    """Launch the write kernel on ``call`` as it is: no checks (``call`` from
    :func:`check_canary_write`, or changed by hand in a lesson that shows an unchecked input)."""
    ctx, plan = call.context, call.plan
    words, params, n_src = source_arguments(ctx)
    flag = ctx.enable_chain_position_assert
    if flag is None:
        flag = device.xp.zeros(1, dtype=np.int32)
    exp_tok = call.expected_input_tokens if call.enable_write_input_assert else call.input_ids
    exp_pos = call.expected_input_positions if call.enable_write_input_assert else call.positions
    blocks, threads = _write_geometry(int(plan.write_seed_slot_indices.shape[0]))
    device.launch(canary_write_kernel, blocks, threads, canary_fields(ctx.canary_buf), plan.write_offsets,
                  plan.write_seed_slot_indices, plan.write_num_valid_reqs, call.input_ids, call.positions,
                  call.out_cache_loc, int(ctx.kernel_kind), int(call.enable_write_input_assert), exp_tok,
                  exp_pos, ctx.violation_ring, ctx.violation_write_index, ctx.slot_run_counter,
                  ctx.kernel_run_counter, flag, *words, params, n_src,
                  value_flags.open_gate() if call.gate is None else call.gate)


def launch_canary_write_kernel(*, context: VerifyOrWriteContext, plan: WritePlan, input_ids, positions,
                               out_cache_loc, enable_write_input_assert: bool, expected_input_tokens,
                               expected_input_positions, checks: str = "full") -> None:
    """Write canary rows for one step (see the module docstring).

    ``input_ids``, ``positions``, ``out_cache_loc`` (and the expected tensors when
    ``enable_write_input_assert``; they must be None otherwise): ``[num_tokens]`` int64 device arrays
    covering every flat entry of the plan. ``checks="full"`` (default) first checks on the device
    that the plan's rows lie inside the inputs, that slots and seeds are ``< num_slots`` and that
    live slots are distinct and not seeds (``write_checks``; one small kernel and one 136-byte
    read-back). ``checks="shapes"`` skips those value checks, for a caller that guarantees them.
    """
    call = check_canary_write(
        context=context, plan=plan, input_ids=input_ids, positions=positions,
        out_cache_loc=out_cache_loc, enable_write_input_assert=enable_write_input_assert,
        expected_input_tokens=expected_input_tokens, expected_input_positions=expected_input_positions,
        checks=checks, defer=True)
    launch_then_settle(call, launch_unchecked, settle_canary_write)   # gated kernel, then the verdict
