"""Sweep entry points of the kv-canary family: plan, write, verify and the types they take.

Each launcher starts from a valid call built with the NumPy references (a written history, so that
seeds, predecessors and real-KV fingerprints hold real values) and is judged against its reference.
The allocators and ``RealKvSource`` are judged by whether the launchers accept what they build.
"""

from __future__ import annotations

import math

import numpy as np

from hisparse_numba import device
from hisparse_numba.kv_canary import (
    RealKvHashMode,
    RealKvSource,
    VerifyOrWriteContext,
    VerifyPlan,
    WritePlan,
    check_canary_verify,
    check_canary_write,
    launch_canary_plan_kernels,
    launch_canary_plan_kernels_reference,
    launch_canary_verify_kernel,
    launch_canary_verify_kernel_reference,
    launch_canary_write_kernel,
    launch_canary_write_kernel_reference,
)
from hisparse_numba.kv_canary.examples import allocate_plans, plan_problem, real_kv_pool, step_inputs

from .harness import (EntryPoint, Mutation, alias, array_mutations, arrays_of, compare_calls, put,
                      reference_judge, scalar_mutations, value_mutation)
from .wide import wide_mutations

MAX_REQS, MAX_SEQ_LEN = 4, 8
NUM_SLOTS = MAX_REQS * MAX_SEQ_LEN  # the linear req_to_token names slots 0..31
PLAN_INPUTS = dict(req_pool_indices=np.int64, prefix_lens=np.int64, extend_seq_lens=np.int64,
                   req_to_token=np.int32, full_to_swa_index_mapping=np.int64,
                   req_to_verify_expected_tokens=np.int32, req_to_verify_expected_tokens_valid_lens=np.int64)
OPTIONAL = ("full_to_swa_index_mapping", "req_to_verify_expected_tokens",
            "req_to_verify_expected_tokens_valid_lens")
# sglang's exact texts that do not name the argument (kept word for word on purpose)
EXPECTED_TEXT = ("expected input tensors",)
SGLANG_BS_TEXT = ("bs=",)                           # "kv-canary: bs={bs} exceeds write_req_capacity={r}"
SGLANG_CAPACITY_TEXT = ("write_req_capacity",)      # the same text, from the WritePlan's side
SOURCE_ROW_TEXT = ("RealKvSource row",)             # "RealKvSource row is too narrow ...": the tensor's row


def _set(path, label, fn, must_reject=True, names=()):
    return value_mutation(path, label, fn, must_reject=must_reject, names=names)


def _first(v, x):
    """``v`` with element 0 (of a 1-D array) replaced by ``x``."""
    v = v.copy()
    v.reshape(-1)[0] = x
    return v


def flag_mutations(path: str, names: tuple = ()) -> list[Mutation]:
    """Bad and good values of a True/False argument (0 and 1 are accepted, nothing else)."""
    out = []
    for label, value, bad in (("float 1.0", 1.0, True), ("float 0.5", 0.5, True), ("nan", math.nan, True),
                              ("string", "True", True), ("list", [True], True), ("None", None, True),
                              ("2", 2, True), ("int 1 (fine)", 1, False), ("numpy bool (fine)", np.True_, False)):
        out.append(Mutation(f"{path}: {label}", path, lambda call, v=value: put(call, path, v), bad, names))
    return out


# ---------------------------------------------------------------------------------------------
# Plan.

def build_plan(rng):
    p = plan_problem([1, 2, 0, 3], [5, 3, 0, 6], [1, 2, 0, 2], max_reqs=MAX_REQS, max_seq_len=MAX_SEQ_LEN)
    p.swa_window_size = 4
    p.full_to_swa_index_mapping = rng.permutation(NUM_SLOTS + 2).astype(np.int64)
    p.req_to_verify_expected_tokens = rng.integers(0, 1000, size=(MAX_REQS, MAX_SEQ_LEN)).astype(np.int32)
    p.req_to_verify_expected_tokens_valid_lens = np.array([8, 2, 0, 7], dtype=np.int64)
    p.kv_token_id_vs_position_offset = 1
    vp, wp = allocate_plans(24, p.bs, host=True)
    return dict(verify_plan_out=vp, write_plan_out=wp, verify_capacity=24, **p.inputs(to_device=False))


def plan_mutations(call):
    out = []
    for name, dtype in PLAN_INPUTS.items():
        out += array_mutations(name, call[name], dtypes=(dtype,), optional=name in OPTIONAL,
                               names=SGLANG_BS_TEXT if name == "req_pool_indices" else ())
    for plan in ("verify_plan_out", "write_plan_out"):
        for field, a in call[plan].arrays().items():
            out += array_mutations(f"{plan}.{field}", a, dtypes=(a.dtype,), axes=a.shape[0] > 1,
                                   names=SGLANG_CAPACITY_TEXT if field == "write_seed_slot_indices" else ())
    out += scalar_mutations("swa_window_size", call["swa_window_size"], low=0, extremes=True)
    out += scalar_mutations("verify_capacity", call["verify_capacity"], low=24, high=24, extremes=True)
    out += scalar_mutations("kv_token_id_vs_position_offset", 1, low=-2**31, high=2**31, extremes=True)
    out += [Mutation("verify_plan_out: a WritePlan", "verify_plan_out",
                     lambda c: put(c, "verify_plan_out", c["write_plan_out"]), True),
            Mutation("checks: 'none'", "checks", lambda c: put(c, "checks", "none"), True),
            Mutation("checks: 'shapes' (fine)", "checks", lambda c: put(c, "checks", "shapes"), False)]
    pool_rows = call["req_to_verify_expected_tokens"].shape[0]
    out += [
        _set("req_pool_indices", "past req_to_token's rows", lambda v: _first(v, MAX_REQS)),
        _set("req_pool_indices", "negative", lambda v: _first(v, -1)),
        _set("req_pool_indices", "very negative", lambda v: _first(v, -2**40)),
        _set("req_pool_indices", "a request twice (harmless)", lambda v: np.array([1, 1, 0, 3]), must_reject=False),
        _set("req_pool_indices", "all padding", lambda v: np.zeros_like(v), must_reject=False),
        _set("prefix_lens", "past max_seq_len", lambda v: _first(v, MAX_SEQ_LEN + 1)),
        _set("prefix_lens", "huge", lambda v: _first(v, 2**62)),
        _set("prefix_lens", "negative (harmless)", lambda v: _first(v, -3), must_reject=False),
        _set("prefix_lens", "garbage on a padding row (harmless)", lambda v: np.array([5, 3, 10**6, 6]),
             must_reject=False),
        _set("extend_seq_lens", "past max_seq_len", lambda v: _first(v, MAX_SEQ_LEN)),
        _set("extend_seq_lens", "huge", lambda v: np.full_like(v, 2**62)),
        _set("extend_seq_lens", "negative (harmless)", lambda v: _first(v, -5), must_reject=False),
        _set("req_to_verify_expected_tokens", "fewer rows than the requests in use",
             lambda v: v[:pool_rows - 1].copy()),
        _set("req_to_verify_expected_tokens_valid_lens", "past the pool width (harmless)",
             lambda v: np.full_like(v, 2**40), must_reject=False),
        _set("req_to_verify_expected_tokens_valid_lens", "negative (harmless)",
             lambda v: np.full_like(v, -7), must_reject=False),
        _set("full_to_swa_index_mapping", "shorter than the slots (clamped, harmless)",
             lambda v: v[:5].copy(), must_reject=False),
        _set("full_to_swa_index_mapping", "huge and negative entries (harmless)",
             lambda v: np.where(np.arange(v.size) % 2, -9, 2**50), must_reject=False),
        _set("req_to_token", "negative and huge slots (harmless)",
             lambda v: np.where(v % 3 == 0, -1, 2**31 - 1).astype(np.int32), must_reject=False),
        alias("verify_plan_out.verify_slot_indices", "verify_plan_out.verify_expected_tokens"),
        alias("prefix_lens", "write_plan_out.write_seed_slot_indices"),
        alias("prefix_lens", "extend_seq_lens", must_reject=False),
        _set("extend_seq_lens", "garbage on a padding row (harmless)",
             lambda v: np.where(call["req_pool_indices"] == 0, 2**62, v), must_reject=False),
        _set("req_to_verify_expected_tokens_valid_lens", "garbage on a padding row (harmless)",
             lambda v: np.where(call["req_pool_indices"] == 0, -2**63, v), must_reject=False),
    ]
    written = [p for p, _ in arrays_of({k: call[k] for k in ("verify_plan_out", "write_plan_out")})]
    out += wide_mutations(call, written=written, bounds={
        "req_pool_indices": (MAX_REQS,), "prefix_lens": (MAX_SEQ_LEN,), "extend_seq_lens": (MAX_SEQ_LEN,),
        "full_to_swa_index_mapping": (NUM_SLOTS,), "req_to_token": (NUM_SLOTS,),
        "req_to_verify_expected_tokens_valid_lens": (MAX_SEQ_LEN,)})
    return out


# ---------------------------------------------------------------------------------------------
# Write and verify: a context with a written history.

def _history(rng):
    """(host context after a prefill of requests 1..3, tokens, the real-KV pool)."""
    pool = real_kv_pool(rng, NUM_SLOTS, page_size=2, bytes_per_token=32, row_padding=0)
    ctx = VerifyOrWriteContext.allocate(NUM_SLOTS, ring_capacity=16, array_module=np,
                                        real_kv_sources=(RealKvSource(pool, 2, 32, 32),),
                                        real_kv_hash_mode=RealKvHashMode.ALL, chain_position_assert=True)
    tokens = rng.integers(0, 1000, size=(MAX_REQS, MAX_SEQ_LEN)).astype(np.int64)
    prefill = plan_problem([1, 2, 3], [0, 0, 0], [5, 3, 6], max_reqs=MAX_REQS, max_seq_len=MAX_SEQ_LEN)
    _, wp = _plans(prefill, 1)
    launch_canary_write_kernel_reference(context=ctx, plan=wp, enable_write_input_assert=False,
                                         expected_input_tokens=None, expected_input_positions=None,
                                         **step_inputs(prefill, tokens))
    return ctx, tokens


def _plans(problem, verify_capacity, write_req_capacity=None):
    vp, wp = allocate_plans(verify_capacity, write_req_capacity or max(problem.bs, 1), host=True)
    launch_canary_plan_kernels_reference(verify_plan_out=vp, write_plan_out=wp, verify_capacity=verify_capacity,
                                         **problem.inputs(to_device=False))
    return vp, wp


def build_write(rng):
    ctx, tokens = _history(rng)
    step = plan_problem([1, 2, 0, 3], [5, 3, 0, 6], [2, 1, 0, 1], max_reqs=MAX_REQS, max_seq_len=MAX_SEQ_LEN)
    _, wp = _plans(step, 16, write_req_capacity=6)  # rows 4 and 5 lie past write_num_valid_reqs
    inputs = step_inputs(step, tokens, pad_tokens=1)
    expected_tokens = inputs["input_ids"].copy()
    expected_tokens[1] += 1  # one WRITE_TOKEN_MISMATCH violation
    return dict(context=ctx, plan=wp, enable_write_input_assert=True, expected_input_tokens=expected_tokens,
                expected_input_positions=inputs["positions"].copy(), **inputs)


def build_verify(rng):
    ctx, tokens = _history(rng)
    canary = ctx.canary_buf.view(np.int64)
    canary[17, 0] += 1  # a corrupted token: chain and token violations
    nxt = plan_problem([1, 2, 0, 3], [5, 3, 0, 6], [0, 0, 0, 0], max_reqs=MAX_REQS, max_seq_len=MAX_SEQ_LEN)
    nxt.req_to_verify_expected_tokens = tokens.astype(np.int32)
    nxt.req_to_verify_expected_tokens_valid_lens = np.full(4, MAX_SEQ_LEN, dtype=np.int64)
    vp, _ = _plans(nxt, 16)
    return dict(context=ctx, plan=vp, check_verify_expected_token=True)


def context_mutations(call):
    ctx = call["context"]
    out = []
    for name, a in ctx.state_arrays().items():
        out += array_mutations(f"context.{name}", a, dtypes=(a.dtype,), axes=a.shape[0] > 1 or name == "canary_buf",
                               names=("real_kv_sources",) if name == "canary_buf" else ())
    out += array_mutations("context.enable_chain_position_assert", ctx.enable_chain_position_assert,
                           dtypes=(np.int32,), optional=True, axes=False)
    out += scalar_mutations("context.kernel_kind", ctx.kernel_kind, extremes=True)
    out += scalar_mutations("context.real_kv_hash_mode", ctx.real_kv_hash_mode, low=0, high=2, extremes=True)
    src = ctx.real_kv_sources[0]
    short = RealKvSource(src.tensor[:-1], src.page_size, src.num_bytes_per_token, src.read_bytes)
    out += [
        Mutation("context.real_kv_sources: too short for the canary slots", "context.real_kv_sources",
                 lambda c: put(c, "context.real_kv_sources", (short,)), True, ("real_kv_sources[0]",)),
        Mutation("context.real_kv_sources: five sources", "context.real_kv_sources",
                 lambda c: put(c, "context.real_kv_sources", (src,) * 5), True, ("RealKvSource",)),
        Mutation("context.real_kv_sources: not a RealKvSource", "context.real_kv_sources",
                 lambda c: put(c, "context.real_kv_sources", (src.tensor,)), True, ("real_kv_sources[0]",)),
        Mutation("context.real_kv_sources: a list (fine)", "context.real_kv_sources",
                 lambda c: put(c, "context.real_kv_sources", [src]), False),
        Mutation("context.real_kv_sources: a source over canary_buf's own bytes", "context.real_kv_sources",
                 lambda c: put(c, "context.real_kv_sources", (RealKvSource(c["context"].canary_buf, 2, 16, 16),)),
                 True, ("canary_buf",)),
        Mutation("context.real_kv_sources: a source over violation_ring's bytes", "context.real_kv_sources",
                 lambda c: put(c, "context.real_kv_sources", (RealKvSource(c["context"].violation_ring, 4, 16, 16),)),
                 True, ("violation_ring",)),
        Mutation("context.real_kv_sources: None", "context.real_kv_sources",
                 lambda c: put(c, "context.real_kv_sources", None), True),
        Mutation("context: not a context", "context", lambda c: put(c, "context", "ctx"), True),
        Mutation("checks: 'none'", "checks", lambda c: put(c, "checks", "none"), True),
        Mutation("checks: 'shapes' (fine)", "checks", lambda c: put(c, "checks", "shapes"), False),
        _set("context.canary_buf", "random bytes (corrupted state)",
             lambda v: np.random.default_rng(3).integers(0, 256, v.shape, dtype=np.uint8), must_reject=False),
        _set("context.violation_write_index", "negative (corrupted)", lambda v: v * 0 - 3, must_reject=False),
        _set("context.violation_write_index", "int32 max (corrupted)", lambda v: np.full_like(v, 2**31 - 1),
             must_reject=False),
        _set("context.violation_write_index", "at the capacity", lambda v: v * 0 + 16, must_reject=False),
        _set("context.slot_run_counter", "int64 max (corrupted)", lambda v: np.full_like(v, 2**63 - 1), must_reject=False),
        _set("context.enable_chain_position_assert", "7 (on)", lambda v: v * 0 + 7, must_reject=False),
        alias("context.slot_run_counter", "context.kernel_run_counter"),
        alias("context.violation_write_index", "context.enable_chain_position_assert"),
    ]
    return out


def _context_wide(call, bounds):
    """The wide mutations of a write or verify call: the context's state arrays are written."""
    written = [f"context.{name}" for name in call["context"].state_arrays()]
    ring = call["context"].violation_ring.shape[0]
    return wide_mutations(call, written=written, bounds={
        "context.violation_write_index": (ring,), **bounds})


def _without_checks(reference):
    """``reference`` called without the launcher-only ``checks`` keyword."""
    def call(**kw):
        kw.pop("checks", None)
        return reference(**kw)
    return call


def _state_judge(reference):
    """Run ``reference`` on the host call; every array equal, except the ring: on a GPU its rows
    land in a racy order, so they compare as a multiset, and not at all when the call had more
    violations than free rows (which ones are kept is then a race)."""
    def judge(host_call, device_call, result):
        before = int(host_call["context"].violation_write_index[0])
        _without_checks(reference)(**host_call)
        ring_path = "context.violation_ring"
        want, got = dict(arrays_of(host_call)), dict(arrays_of(device_call))
        for path in want:
            if path == ring_path:
                continue
            why = compare_calls({path: want[path]}, {path: got[path]})
            if why:
                return why
        after, cap = int(host_call["context"].violation_write_index[0]), want[ring_path].shape[0]
        if 0 <= before <= after <= cap:
            g, w = device.to_host(got[ring_path]), want[ring_path]
            if sorted(map(tuple, g.tolist())) != sorted(map(tuple, w.tolist())):
                return "violation ring rows differ from the reference (as a multiset)"
        return None
    return judge


def write_mutations(call):
    out = context_mutations(call)
    for name in ("input_ids", "positions", "out_cache_loc", "expected_input_tokens", "expected_input_positions"):
        out += array_mutations(name, call[name], dtypes=(np.int64,),
                               names=EXPECTED_TEXT if name.startswith("expected") else ())
    for field, a in call["plan"].arrays().items():
        out += array_mutations(f"plan.{field}", a, dtypes=(a.dtype,), axes=a.shape[0] > 1)
    out += flag_mutations("enable_write_input_assert")
    out += [Mutation("plan: a VerifyPlan", "plan", lambda c: put(c, "plan", VerifyPlan.allocate(4, array_module=device.xp)), True)]
    loc = call["out_cache_loc"]
    live = np.flatnonzero(loc >= 0)
    seed = int(call["plan"].write_seed_slot_indices[0])
    out += [
        _set("out_cache_loc", "past the canary buffer", lambda v: np.where(v >= 0, v + NUM_SLOTS, v)),
        _set("out_cache_loc", "one slot past the end", lambda v: _first(v, NUM_SLOTS)),
        _set("out_cache_loc", "two writes into one slot", lambda v: np.where(np.arange(v.size) == live[1], v[live[0]], v)),
        _set("out_cache_loc", "a write into a row's seed slot", lambda v: _first(v, seed)),
        _set("out_cache_loc", "-1: skipped (harmless)", lambda v: _first(v, -1), must_reject=False),
        _set("out_cache_loc", "very negative (skipped, harmless)", lambda v: _first(v, -2**62), must_reject=False),
        _set("input_ids", "arbitrary tokens (fine)", lambda v: v * 7 - 2**40, must_reject=False),
        _set("positions", "a gap (a chain-position violation, fine)", lambda v: v + 3, must_reject=False),
        _set("plan.write_seed_slot_indices", "past the canary buffer", lambda v: _first(v, NUM_SLOTS)),
        _set("plan.write_seed_slot_indices", "-1: a chain head (fine)", lambda v: np.full_like(v, -1), must_reject=False),
        _set("plan.write_offsets", "decreasing", lambda v: np.concatenate([[0, 2, 1], v[3:]])),
        _set("plan.write_offsets", "past the inputs", lambda v: v + 2),
        _set("plan.write_offsets", "negative start", lambda v: _first(v, -1)),
        _set("plan.write_offsets", "garbage after the valid rows (harmless)",
             lambda v: np.where(np.arange(v.size) > 4, -9, v), must_reject=False),
        _set("plan.write_num_valid_reqs", "past the plan rows (clamped)", lambda v: v * 0 + 99, must_reject=False),
        _set("plan.write_num_valid_reqs", "negative (nothing written)", lambda v: v * 0 - 1, must_reject=False),
        _set("plan.write_num_valid_reqs", "zero", lambda v: v * 0, must_reject=False),
        alias("context.violation_write_index", "plan.write_num_valid_reqs"),
        alias("input_ids", "expected_input_tokens", must_reject=False),
    ]
    out += _context_wide(call, {"out_cache_loc": (NUM_SLOTS,), "plan.write_offsets": (loc.size,),
                                "plan.write_seed_slot_indices": (NUM_SLOTS,),
                                "plan.write_num_valid_reqs": (call["plan"].write_seed_slot_indices.size,)})
    return out


def verify_mutations(call):
    out = context_mutations(call)
    for field, a in call["plan"].arrays().items():
        out += array_mutations(f"plan.{field}", a, dtypes=(a.dtype,), axes=a.shape[0] > 1)
    out += flag_mutations("check_verify_expected_token")
    out += [Mutation("plan: a WritePlan", "plan", lambda c: put(c, "plan", WritePlan.allocate(4, array_module=device.xp)), True)]
    out += [
        _set("plan.verify_slot_indices", "past the canary buffer", lambda v: _first(v, NUM_SLOTS)),
        _set("plan.verify_slot_indices", "below -num_slots", lambda v: _first(v, -NUM_SLOTS - 1)),
        _set("plan.verify_slot_indices", "-1: the last slot (as sglang)", lambda v: _first(v, -1), must_reject=False),
        _set("plan.verify_slot_indices", "0: skipped", lambda v: np.zeros_like(v), must_reject=False),
        _set("plan.verify_prev_slot_indices", "past the canary buffer", lambda v: np.full_like(v, NUM_SLOTS + 5)),
        _set("plan.verify_prev_slot_indices", "very negative: a chain head", lambda v: np.full_like(v, -2**50),
             must_reject=False),
        _set("plan.verify_expected_positions", "arbitrary (violations, fine)", lambda v: v * 3 + 1, must_reject=False),
        _set("plan.verify_expected_tokens", "arbitrary (violations, fine)", lambda v: v + 1, must_reject=False),
        # the count is clamped to the capacity, but then the plan's unfilled (poisoned) entries are
        # read: the rejection names the first bad slot, which is the argument actually wrong
        _set("plan.verify_num_valid", "past the capacity (clamped)", lambda v: np.full_like(v, 2**31 - 1),
             must_reject=False, names=("plan.verify_slot_indices",)),
        _set("plan.verify_num_valid", "negative (nothing checked)", lambda v: v * 0 - 4, must_reject=False),
        _set("plan.enable", "0 (overflowed plan)", lambda v: v * 0, must_reject=False),
        Mutation("plan.enable: 0 with slots past the buffer (not read)", "plan.enable",
                 lambda c: (_set("plan.enable", "", lambda v: v * 0).apply(c),
                            _set("plan.verify_slot_indices", "", lambda v: v + 10**6).apply(c)), False),
        alias("context.violation_write_index", "plan.verify_num_valid"),
        alias("plan.verify_slot_indices", "plan.verify_prev_slot_indices", must_reject=False),
    ]
    cap = call["plan"].verify_slot_indices.size
    out += _context_wide(call, {"plan.verify_slot_indices": (NUM_SLOTS, -NUM_SLOTS),
                                "plan.verify_prev_slot_indices": (NUM_SLOTS,),
                                "plan.verify_num_valid": (cap,)})
    return out


# ---------------------------------------------------------------------------------------------
# The types: what the allocators and RealKvSource build must be what the launchers accept.

def _accepted(ctx=None, vp=None, wp=None) -> str | None:
    ctx = ctx or VerifyOrWriteContext.allocate(NUM_SLOTS)
    try:
        check_canary_verify(context=ctx, plan=vp or VerifyPlan.allocate(4), check_verify_expected_token=False)
        wp = wp or WritePlan.allocate(2)
        empty = device.xp.zeros(0, dtype=np.int64)
        check_canary_write(context=ctx, plan=wp, input_ids=empty, positions=empty, out_cache_loc=empty,
                           enable_write_input_assert=False, expected_input_tokens=None,
                           expected_input_positions=None)
    except (ValueError, TypeError) as e:
        return f"the launchers reject what was built: {e}"
    return None


def _allocator_entry(name, build, call, mutations, judge, to_device=lambda c: dict(c)):
    return EntryPoint(name, build, call, mutations, judge, to_device=to_device)


def _scalar_entry_mutations(specs):
    def mutations(call):
        out = []
        for name, low, high in specs:
            out += scalar_mutations(name, call[name], low=low, high=high)
        return out
    return mutations


def build_source(rng):
    return dict(tensor=real_kv_pool(rng, NUM_SLOTS, page_size=2, bytes_per_token=32, row_padding=0),
                page_size=2, num_bytes_per_token=32, read_bytes=16)


def source_mutations(call):
    out = array_mutations("tensor", call["tensor"], layout=True, axes=True, any_shape=True, names=SOURCE_ROW_TEXT)
    out += wide_mutations({"tensor": call["tensor"]}, written=(), pools=("tensor",))
    for m in out:  # a 1-D tensor has no rows, an empty one covers no slot: documented invalid
        if m.name.endswith(("flattened", "0-d", "axis 0 empty")):
            m.must_reject = True
    out += _scalar_entry_mutations([("page_size", 1, None), ("num_bytes_per_token", 16, None),
                                    ("read_bytes", 16, 32)])(call)
    return out


def source_judge(host_call, device_call, result):
    mode_all = VerifyOrWriteContext.allocate(min(NUM_SLOTS, int(result.tensor.shape[0]) * result.page_size),
                                             real_kv_sources=(result,), real_kv_hash_mode=RealKvHashMode.ALL)
    return _accepted(ctx=mode_all)


ENTRY_POINTS = [
    EntryPoint("launch_canary_plan_kernels", build_plan, lambda c: launch_canary_plan_kernels(**c),
               plan_mutations, reference_judge(_without_checks(launch_canary_plan_kernels_reference)),
               budget=220),
    EntryPoint("launch_canary_write_kernel", build_write, lambda c: launch_canary_write_kernel(**c),
               write_mutations, _state_judge(launch_canary_write_kernel_reference), budget=200),
    EntryPoint("launch_canary_verify_kernel", build_verify, lambda c: launch_canary_verify_kernel(**c),
               verify_mutations, _state_judge(launch_canary_verify_kernel_reference), budget=250),
    _allocator_entry("VerifyPlan.allocate", lambda rng: dict(verify_capacity=8),
                     lambda c: VerifyPlan.allocate(**c), _scalar_entry_mutations([("verify_capacity", 1, None)]),
                     lambda h, d, vp: _accepted(vp=vp)),
    _allocator_entry("WritePlan.allocate", lambda rng: dict(write_req_capacity=4),
                     lambda c: WritePlan.allocate(**c), _scalar_entry_mutations([("write_req_capacity", 1, None)]),
                     lambda h, d, wp: _accepted(wp=wp)),
    _allocator_entry("VerifyOrWriteContext.allocate",
                     lambda rng: dict(num_slots=NUM_SLOTS, ring_capacity=8, slot_stride_bytes=40, kernel_kind=3,
                                      real_kv_hash_mode=0, chain_position_assert=True),
                     lambda c: VerifyOrWriteContext.allocate(**c),
                     lambda call: (_scalar_entry_mutations([("num_slots", 1, None), ("ring_capacity", 1, None),
                                                            ("slot_stride_bytes", 32, None), ("kernel_kind", None, None),
                                                            ("real_kv_hash_mode", 0, 2)])(call)
                                   + flag_mutations("chain_position_assert")
                                   + [Mutation("slot_stride_bytes: 36 (not whole int64 fields)", "slot_stride_bytes",
                                               lambda c: put(c, "slot_stride_bytes", 36), True)]),
                     lambda h, d, ctx: _accepted(ctx=ctx)),
    _allocator_entry("RealKvSource", build_source, lambda c: RealKvSource(**c), source_mutations, source_judge,
                     to_device=lambda c: {**c, "tensor": device.to_device(c["tensor"])}),
]
