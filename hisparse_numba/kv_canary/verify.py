"""kv-canary verify: check the canary rows a VerifyPlan lists; never writes the canary buffer.

``kernel_run_counter += 1`` on every call. When ``plan.enable[0] == 0`` (the plan overflowed) nothing
else happens. Otherwise, for the first ``active = min(verify_num_valid, C)`` entries
(``slot_run_counter += active``, slot-0 entries included), entry ``k`` with slot ``s``:

* ``s == 0`` (the padded-token dummy slot) is skipped;
* CHAIN: when ``prev != 0``, the stored prev_hash must equal ``H(anchor)`` (``prev < 0``) or
  ``mix3(prev.prev_hash, prev.token, prev.position)`` (the predecessor's stored fields);
* POSITION: the stored position must equal ``verify_expected_positions[k]``;
* TOKEN (only with ``check_verify_expected_token``): an expected token ``!= -1`` must equal the stored one;
* REAL_KV: the stored real_kv_hash must equal the fold of the slot's live real-KV bytes.

A failing entry appends ``(kind, slot, stored position, stored token, expected token or -1, stored
prev_hash, expected prev_hash, bits)`` to the ring (see ``context`` for the ring's order).
Negative slots are not skipped (as in sglang): they index from the end of the buffer.

Launch geometry: a grid-stride loop, ``min(64, ceil(C / 512))`` blocks of 512 threads on a GPU
(64 threads and at most 2 blocks in the simulator); thread 0 of block 0 bumps both counters.

Read top-down: the NumPy reference, the kernel, the launchers (``launch_unchecked(call)`` launches
a :class:`CanaryVerifyCall` that ``check_canary_verify`` in ``verify_checks`` accepted;
``launch_canary_verify_kernel`` is the two together). The behaviour reproduced is described in
``docs/kv-canary-behaviour.md#verify``. Lessons: 02 (verify capacity), 13 (capstone).
"""

from __future__ import annotations

import numpy as np

from .. import device, value_flags
from ..checks import launch_then_settle
from ..device import cuda
from ..value_flags import gate_closed_dev
from .context import (VerifyOrWriteContext, append_violations_reference, canary_fields, fold_real_kv_dev,
                      fold_real_kv_reference, host_sources, record_violation_dev, source_arguments)
from .hashing import (CANARY_FIELD_POSITION, CANARY_FIELD_PREV_HASH, CANARY_FIELD_REAL_KV_HASH,
                      CANARY_FIELD_TOKEN, CHAIN_HEAD_HASH, FailReason, as_int64_dev, mix3, slot_hash_dev,
                      to_signed64)
from .plan_types import VerifyPlan
from .verify_checks import CanaryVerifyCall, check_canary_verify, settle_canary_verify

_CHAIN = int(FailReason.VERIFY_CHAIN_HASH_MISMATCH)
_POSITION = int(FailReason.VERIFY_POSITION_MISMATCH)
_REAL_KV = int(FailReason.VERIFY_REAL_KV_HASH_MISMATCH)
_TOKEN = int(FailReason.VERIFY_TOKEN_MISMATCH)


def launch_canary_verify_kernel_reference(*, context: VerifyOrWriteContext, plan: VerifyPlan,
                                          check_verify_expected_token: bool) -> None:
    """NumPy twin of :func:`launch_canary_verify_kernel` (mutates the ring and the counters)."""
    check_canary_verify(context=context, plan=plan, check_verify_expected_token=check_verify_expected_token,
                        on_device=False)
    ctx = context
    ctx.kernel_run_counter[:1] += 1  # an array add wraps as the device's atomic does
    if int(plan.enable[0]) == 0:
        return
    active = max(0, min(int(plan.verify_num_valid[0]), plan.verify_slot_indices.shape[0]))
    ctx.slot_run_counter[:1] += active
    buf = canary_fields(ctx.canary_buf)
    sources = host_sources(ctx)
    kind = int(ctx.kernel_kind)
    rows = []
    for k in range(active):
        slot = int(plan.verify_slot_indices[k])
        if slot == 0:
            continue
        exp_pos = int(plan.verify_expected_positions[k])
        prev = int(plan.verify_prev_slot_indices[k])
        exp_tok = int(plan.verify_expected_tokens[k]) if check_verify_expected_token else -1
        tok, pos, ph, rk = (int(x) for x in buf[slot, :4])
        reachable = prev != 0
        if not reachable:
            exp_ph = ph
        elif prev < 0:
            exp_ph = to_signed64(CHAIN_HEAD_HASH)
        else:
            exp_ph = to_signed64(mix3(buf[prev, CANARY_FIELD_PREV_HASH], buf[prev, CANARY_FIELD_TOKEN],
                                      buf[prev, CANARY_FIELD_POSITION]))
        bits = 0
        if reachable and ph != exp_ph:
            bits |= _CHAIN
        if check_verify_expected_token and exp_tok != -1 and tok != exp_tok:
            bits |= _TOKEN
        if pos != exp_pos:
            bits |= _POSITION
        if rk != to_signed64(fold_real_kv_reference(ctx, slot, sources)):
            bits |= _REAL_KV
        if bits:
            rows.append([kind, slot, pos, tok, exp_tok, ph, exp_ph, bits])
    append_violations_reference(ctx, ctx.violation_ring, ctx.violation_write_index, rows)


@cuda.jit
def canary_verify_kernel(buf, slots, expected_tokens, expected_positions, prev_slots, num_valid, enable,
                         check_token, kind, ring, write_index, slot_run_counter, kernel_run_counter,
                         src0, src1, src2, src3, src_params, num_sources, gate):
    if gate_closed_dev(gate):      # the call's value check rejected it
        return
    k = cuda.grid(1)
    active = max(min(np.int64(num_valid[0]), slots.shape[0]), 0)
    if k == 0:
        cuda.atomic.add(kernel_run_counter, 0, 1)
        if enable[0] != 0 and active > 0:
            cuda.atomic.add(slot_run_counter, 0, active)
    if enable[0] == 0:
        return
    stride = cuda.gridsize(1)
    while k < active:
        slot = slots[k]
        if slot != 0:
            exp_pos = expected_positions[k]
            prev = prev_slots[k]
            exp_tok = np.int64(-1)
            if check_token != 0:
                exp_tok = expected_tokens[k]
            tok = buf[slot, CANARY_FIELD_TOKEN]
            pos = buf[slot, CANARY_FIELD_POSITION]
            ph = buf[slot, CANARY_FIELD_PREV_HASH]
            rk = buf[slot, CANARY_FIELD_REAL_KV_HASH]
            exp_ph = ph
            if prev != 0:
                exp_ph = as_int64_dev(slot_hash_dev(buf, prev))
            bits = 0
            if prev != 0 and ph != exp_ph:
                bits |= _CHAIN
            if check_token != 0 and exp_tok != -1 and tok != exp_tok:
                bits |= _TOKEN
            if pos != exp_pos:
                bits |= _POSITION
            if rk != as_int64_dev(fold_real_kv_dev(src0, src1, src2, src3, src_params, num_sources, slot)):
                bits |= _REAL_KV
            if bits != 0:
                record_violation_dev(ring, write_index, kind, slot, pos, tok, exp_tok, ph, exp_ph, bits)
        k += stride


def _verify_geometry(capacity: int) -> tuple[int, int]:
    threads = 64 if device.SIMULATOR else 512
    max_blocks = 2 if device.SIMULATOR else 64
    return max(1, min(max_blocks, -(-capacity // threads))), threads


def launch_unchecked(call: CanaryVerifyCall) -> None:
    """Launch the verify kernel on ``call`` as it is: no checks (``call`` from
    :func:`check_canary_verify`, or changed by hand in a lesson that shows an unchecked input)."""
    ctx, plan = call.context, call.plan
    words, params, n_src = source_arguments(ctx)
    blocks, threads = _verify_geometry(int(plan.verify_slot_indices.shape[0]))
    device.launch(canary_verify_kernel, blocks, threads, canary_fields(ctx.canary_buf),
                  plan.verify_slot_indices, plan.verify_expected_tokens, plan.verify_expected_positions,
                  plan.verify_prev_slot_indices, plan.verify_num_valid, plan.enable,
                  int(call.check_verify_expected_token), int(ctx.kernel_kind), ctx.violation_ring,
                  ctx.violation_write_index, ctx.slot_run_counter, ctx.kernel_run_counter, *words, params,
                  n_src,
                  value_flags.open_gate() if call.gate is None else call.gate)


def launch_canary_verify_kernel(*, context: VerifyOrWriteContext, plan: VerifyPlan,
                                check_verify_expected_token: bool, checks: str = "full") -> None:
    """Verify the canary rows listed by ``plan`` (see the module docstring).

    Run the plan kernels first: ``verify_num_valid`` is uninitialised after ``VerifyPlan.allocate``.
    ``checks="full"`` (default) first checks on the device that every slot and predecessor the
    kernel reads is inside the canary buffer (``verify_checks``; one small kernel and one 136-byte
    read-back). ``checks="shapes"`` skips that, for plans made by ``launch_canary_plan_kernels``
    from checked inputs on a canary buffer that covers ``req_to_token``'s slots.
    """
    call = check_canary_verify(context=context, plan=plan,
                               check_verify_expected_token=check_verify_expected_token, checks=checks,
                               defer=True)
    launch_then_settle(call, launch_unchecked, settle_canary_verify)   # gated kernel, then the verdict
