"""Lesson 13 (capstone: kv-canary catches a replay corrupted by an undersized plan).

The scenario (one anchor layer, one skip layer replaying its miss plan), sglang's plan addressing
(one base pointer and one row stride), the canary watch list over the skip layer's hot rows, the
violation-ring decoder and the exercise checker.

Canary slot ids are device rows + 1: slot 0 is the padding slot (verify skips it), so the skip
layer's pool carries one dummy item in front (``layer_full[0]``) and the replay writes into
``layer_full[1:]``.
"""

from __future__ import annotations

import numpy as np

from .. import device
from ..hisparse.single_step.examples import copy_problem, make_swap_in_problem
from ..hisparse.single_step.planned_copy import copy_cache_planned_mla_reference
from ..hisparse.single_step import load_cache_to_device_buffer_mla_reference
from ..kv_canary import (
    FailReason,
    RealKvHashMode,
    RealKvSource,
    VerifyOrWriteContext,
    VerifyPlan,
    WritePlan,
    launch_canary_verify_kernel_reference,
)
from ..kv_canary.hashing import (
    VIOLATION_FIELD_FAIL_REASON_BITS,
    VIOLATION_FIELD_KERNEL_KIND,
    VIOLATION_FIELD_POSITION,
    VIOLATION_FIELD_SLOT_IDX,
    VIOLATION_FIELD_STORED_TOKEN,
    VIOLATION_FIELDS,
    CanaryLaunchTag,
)
from .common import checker, draw_grid, figure, learner_answer, report, show, whole_numbers, wrong

SEED = 26  # rows 0 and 1 both take 7 misses: more than top_k // 2
BATCH, TOP_K, HOT = 3, 8, 16


def capstone_problem():
    """The anchor layer's single-step problem (NumPy, no plan): 3 rows, ``top_k = 8``, a hot
    buffer of 16 slots, 32-byte items; rows 0 and 1 on the long path with 7 misses each, row 2
    on the fast path."""
    rng = np.random.default_rng(SEED)
    return make_swap_in_problem(rng, batch=BATCH, num_top_k=TOP_K, hot_buffer_size=HOT, fast_rows=1,
                                record_plan=False, block_size=32, max_extra=4 * HOT, hit_fraction=0.3)


def skip_layer(problem, seed: int = 1):
    """The skip layer's pools: its host pool (a zero-copy ``host_cache_array``) and, in NumPy,
    its device pool before the step as ``[1 + device rows, item]`` (row 0: the dummy item)."""
    rng = np.random.default_rng(seed)
    item = problem["item_size_bytes"]
    host = device.host_cache_array((problem["host_cache"].size // item, item), np.uint8)
    host[...] = rng.integers(0, 256, host.shape, dtype=np.uint8)
    rows = problem["device_buffer"].size // item
    return host, rng.integers(0, 256, (1 + rows, item), dtype=np.uint8)


def reference_step(problem, host, layer_full):
    """What the step must produce (NumPy references): the anchor's state with a correctly sized
    plan, and the skip layer's device pool after replaying that plan."""
    B, K = problem["top_k_tokens"].shape
    want = copy_problem(problem)
    want.update(miss_src=np.full((B, K), -1, np.int64), miss_dst=np.full((B, K), -1, np.int32),
                miss_count=np.zeros(B, np.int32))
    load_cache_to_device_buffer_mla_reference(**want)
    layer = layer_full.copy()
    copy_cache_planned_mla_reference(miss_src=want["miss_src"], miss_dst=want["miss_dst"],
                                     miss_count=want["miss_count"], num_real_reqs=want["num_real_reqs"],
                                     host_cache=np.asarray(host), device_buffer=layer[1:],
                                     item_size_bytes=want["item_size_bytes"], num_blocks=1, block_size=32)
    return want, layer


def token_id(rid: int, position: int) -> int:
    """A made-up token id for (request row, position): what the canary stores as the token."""
    return (position * 7919 + rid * 104729) % 50257


def watch_list(state):
    """The canary watch list of a step: every hot slot of the real long rows that holds a
    position after the step, per request in position order. ``state``: the reference's arrays
    after the step. Returns one list per watched request of ``(slot, position, token)``, with
    ``slot = device row + 1``."""
    H = state["hot_buffer_size"]
    real = int(state["num_real_reqs"][0])
    out = []
    for b in range(real):
        if int(state["seq_lens"][b]) <= H:
            continue
        rid = int(state["req_pool_indices"][b])
        tags = state["device_buffer_tokens"][rid, :H]
        rows = state["device_buffer_locs"][rid, :H]
        order = np.argsort(tags, kind="stable")
        out.append([(int(rows[s]) + 1, int(tags[s]), token_id(rid, int(tags[s])))
                    for s in order if tags[s] >= 0])
    return out


def canary_plans(watch, *, host: bool = False):
    """A WritePlan plus its ``input_ids``/``positions``/``out_cache_loc`` and a VerifyPlan for the
    watch list, filled directly (as sglang's periodic sweep fills its VerifyPlan for cached
    slots): one chain per request in position order, seeded at the anchor."""
    am = np if host else device.xp
    conv = (lambda a: a) if host else device.to_device
    flat = [e for req in watch for e in req]
    n = len(flat)
    slots = np.array([e[0] for e in flat], np.int64)
    positions = np.array([e[1] for e in flat], np.int64)
    tokens = np.array([e[2] for e in flat], np.int64)
    prev = np.full(n, -1, np.int64)
    offsets = np.zeros(len(watch) + 1, np.int64)
    k = 0
    for r, req in enumerate(watch):
        prev[k + 1:k + len(req)] = slots[k:k + len(req) - 1]
        k += len(req)
        offsets[r + 1] = k
    wp = WritePlan(write_offsets=conv(offsets), write_seed_slot_indices=am.full(len(watch), -1, dtype=np.int64),
                   write_num_valid_reqs=conv(np.array([len(watch)], np.int32)))
    inputs = {"input_ids": conv(tokens), "positions": conv(positions), "out_cache_loc": conv(slots)}
    vp = VerifyPlan(verify_slot_indices=conv(slots), verify_expected_tokens=conv(tokens),
                    verify_expected_positions=conv(positions), verify_prev_slot_indices=conv(prev),
                    verify_num_valid=conv(np.array([n], np.int32)), enable=conv(np.array([1], np.int32)))
    return wp, inputs, vp


def real_kv(layer_full) -> RealKvSource:
    """The skip layer's pool as a real-KV source: slot ``s`` folds all bytes of item ``s``."""
    item = int(layer_full.shape[1])
    return RealKvSource(layer_full, page_size=1, num_bytes_per_token=item, read_bytes=item)


def canary_context(num_slots: int, layer_full, *, ring_capacity: int = 16) -> VerifyOrWriteContext:
    """A zeroed canary context folding ``layer_full``'s bytes (mode ALL), tagged SWEEP_K_FULL."""
    return VerifyOrWriteContext.allocate(num_slots, kernel_kind=CanaryLaunchTag.SWEEP_K_FULL,
                                         ring_capacity=ring_capacity, real_kv_sources=(real_kv(layer_full),),
                                         real_kv_hash_mode=RealKvHashMode.ALL)


def reference_verify(state_before, ctx, watch, layer_full_host):
    """The NumPy verify on host copies: ``state_before`` (``examples.context_state`` taken before
    the kernel's verify), the same plan, the layer's bytes. Returns the reference's state."""
    host = VerifyOrWriteContext.allocate(ctx.canary_buf.shape[0], kernel_kind=ctx.kernel_kind,
                                         ring_capacity=ctx.violation_ring.shape[0], array_module=np,
                                         real_kv_sources=(real_kv(np.ascontiguousarray(layer_full_host)),),
                                         real_kv_hash_mode=ctx.real_kv_hash_mode)
    for k, v in state_before.items():
        host.state_arrays()[k][...] = v
    _, _, vp = canary_plans(watch, host=True)
    launch_canary_verify_kernel_reference(context=host, plan=vp, check_verify_expected_token=True)
    return {k: v.copy() for k, v in host.state_arrays().items()}


def decode_ring(ring, write_index, *, start: int = 0, locate=None) -> list[str]:
    """One readable line per violation row ``[start, min(write_index, capacity))``. ``locate``
    maps a slot to a description (e.g. which request and hot slot owns it)."""
    ring = np.asarray(ring)
    end = min(int(np.asarray(write_index).reshape(-1)[0]), ring.shape[0])
    lines = []
    for row in ring[start:end]:
        slot = int(row[VIOLATION_FIELD_SLOT_IDX])
        bits = FailReason(int(row[VIOLATION_FIELD_FAIL_REASON_BITS]))
        where = f" ({locate(slot)})" if locate else ""
        lines.append(f"{CanaryLaunchTag(int(row[VIOLATION_FIELD_KERNEL_KIND])).name}: slot {slot}{where}, "
                     f"position {int(row[VIOLATION_FIELD_POSITION])}, token {int(row[VIOLATION_FIELD_STORED_TOKEN])}, "
                     f"bits {int(bits)} = {'+'.join(f.name for f in FailReason if f & bits)}")
    return lines


# ---------------------------------------------------------------------------------------------
# Exercise.


def _ring(rows, capacity=8, stale=()):
    """A violation ring holding ``rows`` (``(slot, position, bits)``) then ``stale`` rows past the
    write index (left by nobody: what a reader must ignore)."""
    ring = np.zeros((capacity, VIOLATION_FIELDS), np.int64)
    for i, (slot, pos, bits) in enumerate(list(rows) + list(stale)):
        if i < capacity:
            ring[i] = (CanaryLaunchTag.SWEEP_K_FULL, slot, pos, 1000 + pos, 1000 + pos, 11, 11, bits)
    return ring, np.array([len(rows)], np.int32)


_KV, _CHAIN, _POS = (int(FailReason.VERIFY_REAL_KV_HASH_MISMATCH), int(FailReason.VERIFY_CHAIN_HASH_MISMATCH),
                     int(FailReason.VERIFY_POSITION_MISMATCH))

EXERCISE_CASES = [
    # (ring rows, stale rows past the index, device rows whose KV bytes changed)
    ([(41, 20, _KV), (17, 3, _KV)], [(99, 5, _KV)], [16, 40]),
    ([(8, 2, _POS), (30, 9, _KV | _CHAIN), (30, 9, _KV)], [], [29]),
    ([(5, 1, _CHAIN)], [(6, 2, _KV)], []),
    ([(12, 4, _KV | _POS), (3, 0, _KV)], [], [2, 11]),
]


@checker
def check_corrupted_rows(corrupted_rows) -> bool:
    """Exercise 13-a: ``corrupted_rows(ring, write_index)`` returns the sorted, distinct device rows
    (``slot - 1``) whose real KV bytes no longer match their canary, read from a violation ring
    (``[capacity, 8]`` int64) and its ``[1]`` int32 write index."""
    for rows, stale, expected in EXERCISE_CASES:
        ring, index = _ring(rows, stale=stale)
        answer = learner_answer(corrupted_rows, ring.copy(), index.copy())
        answer = whole_numbers(answer, "corrupted_rows' result", "device rows")
        if answer == expected:
            continue
        slots = sorted({s for s, _, b in rows if b & _KV})
        if sorted(set(answer)) == slots and slots:
            hint = "those are canary slots: device row = slot - 1"
        elif len(answer) != len(set(answer)):
            hint = "a row appears twice: return each row once"
        elif any(s - 1 in answer for s, _, _ in stale):
            hint = "rows at or past the write index are leftovers, not violations"
        elif any(s - 1 in answer for s, _, b in rows if not b & _KV):
            hint = "only the VERIFY_REAL_KV_HASH_MISMATCH bit says the KV bytes changed"
        elif set(answer) < set(expected):
            hint = "a row with several bits set still counts when one of them is REAL_KV (test the bit with &)"
        else:
            hint = "field 1 is the slot, field 7 the reason bits"
        shown = ring[:max(len(rows) + len(stale), 1)]
        wrong(f"{hint}. For the ring\n{shown}\nwith write index {int(index[0])} the answer is {expected}, "
              f"got {answer}")
    return report(True, "field 1 is the slot, field 7 the bits; only rows below the write index "
                  "count, only the REAL_KV bit means changed bytes, and device row = slot - 1", "")


def draw_slots(watch, corrupted_rows, flagged_rows, title: str = "") -> None:
    """The skip layer's watched hot rows, one row of cells per request in position order: green
    correct, red corrupted and flagged by the canary, yellow corrupted but not flagged, blue
    flagged but intact. The number is the device row."""
    width = max(len(req) for req in watch)
    rows = np.full((len(watch), width), -1)
    colors = np.zeros((len(watch), width), int)
    corrupted, flagged = set(corrupted_rows), set(flagged_rows)
    for r, req in enumerate(watch):
        for i, (slot, _, _) in enumerate(req):
            row = slot - 1
            rows[r, i] = row
            colors[r, i] = {(False, False): 3, (True, True): 2, (True, False): 4, (False, True): 1}[
                (row in corrupted, row in flagged)]
    fig, (ax,) = figure(8, 0.6 * len(watch) + 1.3)
    draw_grid(ax, rows, colors=colors, row_labels=[f"request {r}" for r in range(len(watch))],
              title=title or "watched rows: green correct, red corrupted + flagged, yellow corrupted + missed, "
                             "blue flagged only")
    ax.set_xlabel("hot rows of the request, in position order (number: device row)")
    show(fig)
