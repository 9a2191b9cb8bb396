"""Builders of valid kv-canary problems, shared by tests, benchmarks and lessons.

``compile_examples()`` calls every launcher once on small inputs; under
``HISPARSE_NUMBA_BACKEND=compile-only`` that compiles every kernel to PTX.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import device
from .context import RealKvSource, VerifyOrWriteContext
from .hashing import RealKvHashMode
from .plan import (check_canary_plan, launch_canary_plan_kernels, launch_canary_plan_kernels_reference,
                   launch_unchecked)
from .plan_types import VerifyPlan, WritePlan
from .verify import launch_canary_verify_kernel, launch_canary_verify_kernel_reference
from .write import launch_canary_write_kernel, launch_canary_write_kernel_reference

POISON = np.int64(0x5A5A5A5A5A5A5A5A)
POISON32 = np.int32(0x5A5A5A5A)


def linear_req_to_token(max_reqs: int, max_seq_len: int) -> np.ndarray:
    """``req_to_token[rp, pos] = rp * max_seq_len + pos`` (int32): slot ids easy to read by hand."""
    return (np.arange(max_reqs, dtype=np.int32)[:, None] * max_seq_len
            + np.arange(max_seq_len, dtype=np.int32)[None, :]).astype(np.int32)


@dataclass
class PlanProblem:
    """NumPy inputs of one plan call (the launcher's keywords minus the plans and capacity)."""

    req_pool_indices: np.ndarray
    prefix_lens: np.ndarray
    extend_seq_lens: np.ndarray
    req_to_token: np.ndarray
    swa_window_size: int = 0
    full_to_swa_index_mapping: np.ndarray | None = None
    req_to_verify_expected_tokens: np.ndarray | None = None
    req_to_verify_expected_tokens_valid_lens: np.ndarray | None = None
    kv_token_id_vs_position_offset: int = 0
    notes: dict = field(default_factory=dict)

    @property
    def bs(self) -> int:
        return int(self.req_pool_indices.shape[0])

    def needed_verify_entries(self) -> int:
        """Σ verify entries over active rows (what the plan kernel calls total_verify)."""
        total = 0
        for rp, prefix in zip(self.req_pool_indices, self.prefix_lens):
            if rp == 0:
                continue
            start = max(int(prefix) - self.swa_window_size, 0) if self.swa_window_size > 0 else 0
            total += max(int(prefix) - start, 0)
        return total

    def inputs(self, to_device: bool) -> dict:
        conv = device.to_device if to_device else (lambda a: a)
        out = {}
        for name in ("req_pool_indices", "prefix_lens", "extend_seq_lens", "req_to_token",
                     "full_to_swa_index_mapping", "req_to_verify_expected_tokens",
                     "req_to_verify_expected_tokens_valid_lens"):
            a = getattr(self, name)
            out[name] = None if a is None else conv(a)
        out["swa_window_size"] = self.swa_window_size
        out["kv_token_id_vs_position_offset"] = self.kv_token_id_vs_position_offset
        return out


def plan_problem(req_pool_indices, prefix_lens, extend_seq_lens, *, max_reqs=None, max_seq_len=16,
                 req_to_token=None, **kw) -> PlanProblem:
    """A problem from per-row lists; ``req_to_token`` defaults to the linear table."""
    rpi = np.asarray(req_pool_indices, dtype=np.int64)
    if req_to_token is None:
        max_reqs = max_reqs or int(rpi.max(initial=0)) + 1
        req_to_token = linear_req_to_token(max_reqs, max_seq_len)
    return PlanProblem(rpi, np.asarray(prefix_lens, dtype=np.int64),
                       np.asarray(extend_seq_lens, dtype=np.int64), np.ascontiguousarray(req_to_token), **kw)


def allocate_plans(verify_capacity: int, write_req_capacity: int, *, host: bool = False):
    """A (VerifyPlan, WritePlan) pair filled with a poison pattern, so untouched bytes compare equal."""
    am = np if host else device.xp
    vp = VerifyPlan.allocate(verify_capacity, array_module=am)
    wp = WritePlan.allocate(write_req_capacity, array_module=am)
    for a in list(vp.arrays().values()) + list(wp.arrays().values()):
        a[...] = POISON if a.dtype == np.int64 else POISON32
    return vp, wp


def run_plan(problem: PlanProblem, verify_capacity: int, write_req_capacity: int, *, kernel: bool,
             plans=None) -> dict:
    """Run the launcher (``kernel=True``) or the reference; returns NumPy copies of every plan field."""
    vp, wp = plans if plans is not None else allocate_plans(verify_capacity, write_req_capacity,
                                                            host=not kernel)
    fn = launch_canary_plan_kernels if kernel else launch_canary_plan_kernels_reference
    fn(verify_plan_out=vp, write_plan_out=wp, verify_capacity=verify_capacity,
       **problem.inputs(to_device=kernel))
    device.synchronize()
    out = {k: device.to_host(v) for k, v in vp.arrays().items()}
    out.update({k: device.to_host(v) for k, v in wp.arrays().items()})
    return out


def random_plan_problem(rng, *, max_bs=16, seq_lens=(8, 16, 64, 128, 256),
                        distinct_slots=False) -> PlanProblem:
    """A random valid plan problem (sglang's fuzz axes: bs, width, SWA+LUT kind, sparse table,
    padding, expected-token pool with valid_lens, offset 0/1).

    The ``with_oob`` LUT is cut 0-3 entries short so that the clamp is exercised; the clamp maps
    several raw slots to the last entry, which is fine for the plan but breaks the write kernel's
    precondition (distinct live slots). ``distinct_slots=True`` keeps the LUT full length (same
    random draws), so every (request, position) maps to its own slot or to -1."""
    bs = int(rng.integers(1, max_bs + 1))
    max_seq_len = int(rng.choice(seq_lens))
    max_reqs = bs + 2
    sparse = bool(rng.integers(2))
    if sparse:
        rtt = rng.permutation(max_reqs * max_seq_len).astype(np.int32).reshape(max_reqs, max_seq_len) + 1
        rtt = rtt.astype(np.int32)
    else:
        rtt = linear_req_to_token(max_reqs, max_seq_len)
    rows = rng.permutation(np.arange(1, max_reqs))[:bs].astype(np.int64)
    padding = rng.choice(["none", "trailing", "interleaved"])
    if padding == "trailing":
        rows[bs - int(rng.integers(0, bs)) :] = 0
    elif padding == "interleaved":
        rows[rng.random(bs) < 0.3] = 0
    prefix = rng.integers(0, max_seq_len + 1, size=bs).astype(np.int64)
    extend = np.minimum(rng.integers(0, 5, size=bs), max_seq_len - prefix).astype(np.int64)
    if rng.random() < 0.2:
        extend[:] = 0
    prefix[rows == 0] = rng.integers(0, 100000, size=int((rows == 0).sum()))  # garbage on padding rows
    window, lut = 0, None
    swa = rng.random() < 0.5
    if swa:
        window = int(rng.choice([1, 3, 4, 16, 128]))
    if swa or rng.random() < 0.2:
        n = int(rtt.max()) + 1
        kind = rng.choice(["identity", "shift", "permutation", "with_oob"])
        if kind == "identity":
            lut = np.arange(n, dtype=np.int64)
        elif kind == "shift":
            lut = np.arange(n, dtype=np.int64) + 100
        elif kind == "permutation":
            lut = rng.permutation(n).astype(np.int64)
        else:
            lut = np.arange(n, dtype=np.int64)
            lut[rng.random(n) < 0.2] = -1
            short = int(rng.integers(0, 4))
            if not distinct_slots:
                lut = lut[: max(1, n - short)].copy()  # also exercises the clamp
    pool = valid = None
    offset = int(rng.integers(0, 2))
    if rng.random() < 0.6:
        cols = int(rng.integers(1, max_seq_len + 3))
        pool = rng.integers(0, 50000, size=(max_reqs, cols)).astype(np.int32)
        valid = rng.integers(0, cols + 3, size=bs).astype(np.int64)
    return PlanProblem(rows, prefix, extend, rtt, window, lut, pool, valid, offset,
                       notes={"padding": str(padding), "sparse": sparse})


def capacities(problem: PlanProblem, kind: str) -> tuple[int, int]:
    """(verify_capacity, write_req_capacity) for ``loose``, ``tight`` or ``under_by_one``."""
    needed = problem.needed_verify_entries()
    write_cap = max(problem.bs + 4, 8) if kind == "loose" else max(problem.bs, 1)
    if kind == "loose":
        return max(needed + 64, 128), write_cap
    if kind == "tight":
        return max(needed, 1), write_cap
    if kind == "under_by_one":
        return max(needed - 1, 1), write_cap
    raise ValueError(kind)


def step_inputs(problem: PlanProblem, tokens: np.ndarray, *, pad_tokens: int = 0) -> dict:
    """``input_ids``, ``positions``, ``out_cache_loc`` (int64) for the plan's write entries.

    ``tokens[rp, pos]`` is the token of request row ``rp`` at ``pos``; slots come from
    ``req_to_token`` (LUT-translated when the problem has one, as an SWA endpoint does). ``pad_tokens``
    extra entries with slot -1 form a padded tail.
    """
    ids, pos, loc = [], [], []
    lut = problem.full_to_swa_index_mapping
    for rp, prefix, extend in zip(problem.req_pool_indices, problem.prefix_lens, problem.extend_seq_lens):
        if rp == 0 or extend <= 0:
            continue
        for p in range(int(prefix), int(prefix) + int(extend)):
            raw = int(problem.req_to_token[rp, p])
            ids.append(int(tokens[rp, p]))
            pos.append(p)
            loc.append(raw if lut is None or raw < 0 else int(lut[min(raw, lut.shape[0] - 1)]))
    ids += [0] * pad_tokens
    pos += [0] * pad_tokens
    loc += [-1] * pad_tokens
    return {"input_ids": np.array(ids, dtype=np.int64), "positions": np.array(pos, dtype=np.int64),
            "out_cache_loc": np.array(loc, dtype=np.int64)}


def real_kv_pool(rng, num_slots: int, *, page_size: int = 2, bytes_per_token: int = 64,
                 row_padding: int = 16, dtype=np.uint8) -> np.ndarray:
    """A random KV layer ``[ceil(num_slots / page_size), page_size * bytes_per_token + padding]``."""
    rows = -(-num_slots // page_size)
    row_bytes = page_size * bytes_per_token + row_padding
    itemsize = np.dtype(dtype).itemsize
    raw = rng.integers(0, 256, size=rows * row_bytes, dtype=np.uint8)
    host = device.host_cache_array((rows, row_bytes // itemsize), dtype)
    host[...] = raw.view(dtype).reshape(rows, row_bytes // itemsize)
    return host


def context_pair(num_slots: int, **kw):
    """(kernel context on the device, reference context on the host) with identical zeroed state.

    Real-KV sources (in ``kw``) are shared: neither side writes them."""
    dev = VerifyOrWriteContext.allocate(num_slots, **kw)
    host = VerifyOrWriteContext.allocate(num_slots, array_module=np, **kw)
    return dev, host


def context_state(ctx) -> dict:
    """NumPy copies of the arrays a write or verify launch mutates."""
    device.synchronize()
    return {k: device.to_host(v) for k, v in ctx.state_arrays().items()}


def run_step(problem: PlanProblem, ctx, tokens, *, kernel: bool, verify_capacity=None,
             write_req_capacity=None, check_verify_expected_token=False, pad_tokens=0, write=True,
             expected=None):
    """plan -> verify -> write for one step, on the kernels or the references. Returns the plans."""
    vc = verify_capacity or max(problem.needed_verify_entries(), 1)
    wc = write_req_capacity or max(problem.bs, 1)
    vp, wp = allocate_plans(vc, wc, host=not kernel)
    run_plan(problem, vc, wc, kernel=kernel, plans=(vp, wp))
    conv = device.to_device if kernel else (lambda a: a)
    verify = launch_canary_verify_kernel if kernel else launch_canary_verify_kernel_reference
    verify(context=ctx, plan=vp, check_verify_expected_token=check_verify_expected_token)
    if write:
        args = {k: conv(v) for k, v in step_inputs(problem, tokens, pad_tokens=pad_tokens).items()}
        exp = {"expected_input_tokens": None, "expected_input_positions": None}
        if expected is not None:
            exp = {k: conv(v) for k, v in expected.items()}
        fn = launch_canary_write_kernel if kernel else launch_canary_write_kernel_reference
        fn(context=ctx, plan=wp, enable_write_input_assert=expected is not None, **exp, **args)
    return vp, wp


def run_pipeline_example() -> None:
    """One plan -> verify -> write -> verify pipeline on the kernels, with every feature on."""
    rng = np.random.default_rng(1)
    p = plan_problem([1, 2, 0], [0, 0, 0], [4, 3, 0], max_reqs=3, max_seq_len=8)
    num_slots = int(p.req_to_token.max()) + 1
    pools = [real_kv_pool(rng, num_slots), real_kv_pool(rng, num_slots, page_size=1, dtype=np.float16)]
    sources = (RealKvSource(pools[0], 2, 64, 64), RealKvSource(pools[1], 1, 64, 32))
    ctx = VerifyOrWriteContext.allocate(num_slots, real_kv_sources=sources,
                                     real_kv_hash_mode=RealKvHashMode.ALL, chain_position_assert=True)
    tokens = rng.integers(0, 1000, size=p.req_to_token.shape).astype(np.int64)
    inputs = step_inputs(p, tokens)
    run_step(p, ctx, tokens, kernel=True,
             expected={"expected_input_tokens": inputs["input_ids"],
                       "expected_input_positions": inputs["positions"]})
    p2 = plan_problem([1, 2, 0], [4, 3, 0], [1, 1, 0], max_reqs=3, max_seq_len=8)
    p2.req_to_verify_expected_tokens = tokens.astype(np.int32)
    p2.req_to_verify_expected_tokens_valid_lens = np.full(3, 8, dtype=np.int64)
    run_step(p2, ctx, tokens, kernel=True, check_verify_expected_token=True)
    device.synchronize()


def compile_examples() -> None:
    """Call every kv-canary launcher once on a small valid problem."""
    rng = np.random.default_rng(0)
    p = plan_problem([1, 0, 2], [3, 0, 5], [1, 1, 2], max_reqs=3, max_seq_len=16)
    run_plan(p, 16, 4, kernel=True)
    p.swa_window_size = 2
    p.full_to_swa_index_mapping = np.arange(64, dtype=np.int64)
    p.req_to_verify_expected_tokens = rng.integers(0, 100, size=(3, 16)).astype(np.int32)
    p.req_to_verify_expected_tokens_valid_lens = np.full(3, 16, dtype=np.int64)
    run_plan(p, 16, 4, kernel=True)
    # The value check on its own and the offsets kernel behind a gate, as a call checked first and
    # launched after does it (lesson 02; the public launcher runs the check inside that kernel).
    vp, wp = allocate_plans(16, 4)
    launch_unchecked(check_canary_plan(verify_plan_out=vp, write_plan_out=wp, verify_capacity=16,
                                       **p.inputs(to_device=True)))
    device.synchronize()
    run_pipeline_example()


def assert_plans_equal(a: dict, b: dict) -> None:
    """Every plan field byte-identical (including never-written poison bytes)."""
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), (k, a[k], b[k])


def sorted_rows(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort(rows.T[::-1])] if len(rows) else rows


def assert_states_equal(kernel: dict, ref: dict, *, ring_base: int = 0) -> None:
    """Canary buffer and counters byte-identical; ring rows ``[ring_base, index)`` equal as a multiset.

    The order in which concurrent GPU threads reserve ring rows is a race (also in sglang), so rows
    are compared sorted; after an overflow only the index is exact and the kept rows must be among
    the reference's rows."""
    for k in ("canary_buf", "violation_write_index", "slot_run_counter", "kernel_run_counter"):
        assert kernel[k].tobytes() == ref[k].tobytes(), (k, kernel[k], ref[k])
    cap = ref["violation_ring"].shape[0]
    end = int(ref["violation_write_index"][0])
    kr, rr = kernel["violation_ring"], ref["violation_ring"]
    assert kr[:ring_base].tobytes() == rr[:ring_base].tobytes()
    assert kr[min(end, cap):].tobytes() == rr[min(end, cap):].tobytes()
    new_k, new_r = kr[ring_base:min(end, cap)], rr[ring_base:min(end, cap)]
    if end <= cap:
        assert sorted_rows(new_k).tobytes() == sorted_rows(new_r).tobytes(), (new_k, new_r)
