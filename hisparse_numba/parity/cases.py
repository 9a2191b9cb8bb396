"""The parity cases: identical inputs to both sides, then the comparisons of ``compare``.

Each case builds its inputs with the project's own builders, clones them (byte-identical device
copies; the host pool is shared, since both sides only read it), runs one side on each copy and
returns a ``CaseResult``. Sizes: ``Sizes.gpu()`` is sglang's benchmark shape (H 4096, top-k 2048,
4 steps, batch 8, 576-byte items); ``Sizes.small()`` keeps the simulator fast (tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .. import device
from ..hisparse.single_step.examples import make_swap_in_problem, to_device_problem
from ..hisparse.speculative.examples import make_spec_problem, set_selection
from ..hisparse.speculative.state import HiSparseSpecState, default_scratch_capacity
from ..kv_canary.context import RealKvSource, VerifyOrWriteContext
from ..kv_canary.examples import (allocate_plans, capacities, random_plan_problem, real_kv_pool,
                                  step_inputs)
from ..kv_canary.hashing import RealKvHashMode
from .compare import (Check, byte_checks, exclude_unstable, fallback_slots_set_aside, handoff_counts,
                      ring_checks, spec_slot_checks, union_summary)


# The speculative regimes a run compares (Sizes.regimes)
GPU_REGIMES = {"union, few misses (300)": (300, 2048, None),
               "union, benchmark shape (782)": (782, 2048, None),
               "approximate (1500 misses)": (1500, 4000, None),
               "overflow (6000 misses > capacity)": (6000, 256, None)}
SMALL_REGIMES = {"union, few misses": (3, 6, None), "approximate": (8, 16, None),
                 "overflow": (10, 4, 4)}


class Sizes(NamedTuple):
    batch: int
    hot: int
    top_k: int
    steps: int
    tail: int
    item_words: int
    single_top_k: int
    single_hot: int
    block_size: int
    regimes: dict     # name -> (unique misses, resident tokens selected, scratch capacity or None)

    @classmethod
    def gpu(cls) -> "Sizes":
        # block_size 960: sglang's coordinator default for the single-step swap-in (and safe for
        # sglang's own scans, see sglang_scan_problem); sglang's launcher default 256 is not
        return cls(batch=8, hot=4096, top_k=2048, steps=4, tail=16, item_words=72,
                   single_top_k=2048, single_hot=4096, block_size=960, regimes=dict(GPU_REGIMES))

    @classmethod
    def small(cls) -> "Sizes":
        return cls(batch=2, hot=16, top_k=8, steps=3, tail=2, item_words=2, single_top_k=8,
                   single_hot=16, block_size=32, regimes=dict(SMALL_REGIMES))

    @property
    def positions(self) -> int:
        return 4 * (self.hot + self.steps * self.top_k)


@dataclass
class CaseResult:
    name: str
    mode: str                      # "byte for byte" or "slot level"
    checks: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and all(c.ok for c in self.checks)


# --- cloning -----------------------------------------------------------------------------------

def clone(a):
    return device.xp.array(a, copy=True)


def clone_kw(kw: dict) -> dict:
    """A byte-identical copy of launcher keywords; the host pool (read only) is shared."""
    out = {}
    for k, v in kw.items():
        if isinstance(v, HiSparseSpecState):
            out[k] = HiSparseSpecState(*(clone(a) for a in v))
        elif k == "host_cache" or v is None or isinstance(v, (int, bool, np.integer)):
            out[k] = v
        else:
            out[k] = clone(v)
    return out


def restore(dst: dict, src: dict) -> None:
    """Copy every mutable array of ``src`` into ``dst`` (in place, on the device)."""
    for k, v in src.items():
        if isinstance(v, HiSparseSpecState):
            for d, s in zip(dst[k], v):
                d[...] = s
        elif k != "host_cache" and v is not None and not isinstance(v, (int, bool, np.integer)):
            dst[k][...] = v


def snap(kw: dict) -> dict:
    """Flat NumPy copies of every array but the host pool (state fields as ``state.<field>``)."""
    device.synchronize()
    out = {}
    for k, v in kw.items():
        if isinstance(v, HiSparseSpecState):
            out.update({f"state.{f}": device.to_host(a) for f, a in zip(v._fields, v)})
        elif k != "host_cache" and v is not None and not isinstance(v, (int, bool, np.integer)):
            out[k] = device.to_host(v)
    return out


def run_both(ours, theirs, call: str, kw_ours: dict, kw_theirs: dict):
    """Each side in turn, synchronised, so that a fault names the side that made it."""
    for side, kw in ((ours, kw_ours), (theirs, kw_theirs)):
        try:
            getattr(side, call)(kw)
            side.synchronize()
        except Exception as e:
            raise RuntimeError(f"{side.name} {call} failed: {type(e).__name__}: {e}") from e


# --- single-step -------------------------------------------------------------------------------

def sglang_scan_problem(block_size: int, num_top_k: int, hot: int) -> str | None:
    """Why sglang 0.5.23's single-step kernel (CUDA build) would go wrong at this block size,
    or None when it is safe.

    Its warp 0 turns per-chunk counts (one chunk = 32 hot slots, or 32 top-k lanes) into offsets
    with a 32-lane scan over the chunks from the current iteration on, while each iteration only
    refreshes NUM_WARPS = block_size / 32 counts. With fewer than 16 warps the lanes past the
    window add the previous iteration's partial sums into the running total, so from the third
    iteration on the hit, evictable and miss offsets are wrong and the kernel indexes shared and
    global memory out of bounds: an illegal memory access on the H200 at H 4096, top-k 2048,
    block 256 (parity run 2). One or two iterations (chunks <= 2 * NUM_WARPS) stay correct.
    """
    warps = int(block_size) // 32
    chunks = max(-(-int(hot) // 32), -(-int(num_top_k) // 32))
    if warps >= 16 or chunks <= 2 * warps:
        return None
    return (f"block_size {block_size} ({warps} warps) with {chunks} chunks of 32: sglang 0.5.23's "
            "single-step scans need at least 16 warps (block_size >= 512) here")


def single_step_problem(sizes: Sizes, seed: int) -> dict:
    reason = sglang_scan_problem(sizes.block_size, sizes.single_top_k, sizes.single_hot)
    if reason:
        raise ValueError(reason)
    rng = np.random.default_rng(seed)
    p = make_swap_in_problem(rng, batch=sizes.batch, num_top_k=sizes.single_top_k,
                             hot_buffer_size=sizes.single_hot, item_size_bytes=8 * sizes.item_words,
                             index_dtype=np.int64, block_size=sizes.block_size, fast_rows=1)
    return to_device_problem(p)


def single_step_case(ours, theirs, sizes: Sizes, seed: int) -> CaseResult:
    """sglang's single-step kernel numbers misses with a block-wide scan: deterministic, so every
    output and state array must be byte-identical."""
    res = CaseResult("single-step swap-in (load_cache_to_device_buffer_mla)", "byte for byte")
    a = single_step_problem(sizes, seed)
    b = clone_kw(a)
    for call in range(2):
        run_both(ours, theirs, "swap_in", a, b)
        res.checks += byte_checks(snap(a), snap(b), prefix=f"call {call + 1}: ")
        rng = np.random.default_rng(seed + 100 + call)
        _next_queries(rng, a, b, sizes)
    return res


def _next_queries(rng, a: dict, b: dict, sizes: Sizes) -> None:
    """A fresh valid selection for both copies (from ``a``'s resident tags, which equal ``b``'s)."""
    from ..hisparse.single_step.examples import new_queries
    host = {k: device.to_host(v) if k in ("top_k_tokens", "device_buffer_tokens", "host_cache_locs",
                                          "req_pool_indices", "seq_lens") else v for k, v in a.items()}
    new_queries(rng, host)
    a["top_k_tokens"][...] = device.to_device(host["top_k_tokens"])
    b["top_k_tokens"][...] = device.to_device(host["top_k_tokens"])


# --- speculative -------------------------------------------------------------------------------

def spec_selection(rng, sizes: Sizes, misses: int, resident: int, resident_tokens=None):
    """``[batch, steps, top_k]`` tokens with ``misses`` unique non-resident tokens per request
    (each in one step, a quarter of them repeated in the next step) and the rest drawn from
    ``resident`` resident tokens (the initial hot tokens ``0..H-1`` unless ``resident_tokens[b]``)."""
    b_, s_, k_ = sizes.batch, sizes.steps, sizes.top_k
    tokens = np.empty((b_, s_, k_), np.int32)
    limit = sizes.positions - sizes.tail - 1
    for b in range(b_):
        pool = np.arange(sizes.hot) if resident_tokens is None else np.asarray(resident_tokens[b])
        res = rng.choice(pool, size=min(resident, pool.size), replace=False)
        fresh = np.setdiff1d(np.arange(sizes.hot, limit), pool)
        miss = rng.choice(fresh, size=misses, replace=False)
        chunks = [miss[s::s_] for s in range(s_)]
        for s in range(s_):
            mine = chunks[s]
            if s:
                mine = np.concatenate([mine, chunks[s - 1][: len(chunks[s - 1]) // 4]])
            mine = mine[:k_]
            fill = rng.choice(res, size=k_ - mine.size, replace=res.size < k_ - mine.size)
            tokens[b, s] = rng.permutation(np.concatenate([mine, fill]))
    return tokens


def spec_problem(sizes: Sizes, cap, seed: int) -> dict:
    return make_spec_problem(batch=sizes.batch, steps=sizes.steps, top_k=sizes.top_k, hot=sizes.hot,
                             tail=sizes.tail, item_words=sizes.item_words, scratch_capacity=cap,
                             max_positions=sizes.positions, record=True, seed=seed)


def spec_case(ours, theirs, sizes: Sizes, regime: str, seed: int) -> CaseResult:
    misses, resident, cap = sizes.regimes[regime]
    res = CaseResult(f"speculative swap-in, {regime}", "slot level")
    a = spec_problem(sizes, cap, seed)
    capacity = cap or default_scratch_capacity(sizes.hot, sizes.steps, sizes.top_k)
    res.notes.append(f"H {sizes.hot}, top-k {sizes.top_k}, {sizes.steps} steps, batch {sizes.batch}, "
                     f"scratch capacity {capacity}")
    tokens = spec_selection(np.random.default_rng(seed), sizes, misses, resident)
    set_selection(a, tokens, np.full(sizes.batch * sizes.steps, sizes.positions))
    b = clone_kw(a)
    before = snap(a)
    run_both(ours, theirs, "spec", a, b)
    sa, sb = snap(a), snap(b)
    identical = byte_checks(sa, sb)
    same = [c.name for c in identical if c.ok]
    differ = [c.name for c in identical if not c.ok]
    res.notes.append(f"byte-identical arrays: {', '.join(same) or 'none'}; "
                     f"differing: {', '.join(differ) or 'none'}")
    c = clone_kw(b)
    restore(c, _from_snapshot(before, c))
    theirs.spec(c)
    theirs.synchronize()
    sc = snap(c)
    res.notes.append(union_summary(before))
    aside = fallback_slots_set_aside(sa, sb, before)
    if aside:
        res.notes.append(f"{aside} fallback victim slots (either side) set aside from the resident-token "
                         "and scratch-location sets; compared on their own")
    res.checks += exclude_unstable(spec_slot_checks(sa, sb, before, sizes.item_words),
                                   spec_slot_checks(sb, sc, before, sizes.item_words, cross_only=True))
    again = byte_checks(sb, sc)
    res.notes.append("sglang run twice on the same input: " + (
        "byte-identical" if all(x.ok for x in again) else
        "differs in " + ", ".join(x.name for x in again if not x.ok) + " (its miss numbering races)"))
    return res


def _from_snapshot(s: dict, like: dict) -> dict:
    """Device arrays (keyed like launcher keywords) holding a snapshot's values."""
    out = {}
    for k, v in like.items():
        if isinstance(v, HiSparseSpecState):
            out[k] = HiSparseSpecState(*(device.to_device(s[f"state.{f}"]) for f in v._fields))
        elif k in s:
            out[k] = device.to_device(s[k])
    return out


def handoff_case(ours, theirs, sizes: Sizes, seed: int) -> CaseResult:
    """One side makes the state, the other continues from it (both directions)."""
    res = CaseResult("speculative state handed over (re-missed resident tokens, tokens held twice)",
                     "counts must be 0")
    misses, resident, cap = next(iter(sizes.regimes.values()))
    rng = np.random.default_rng(seed)
    first = spec_selection(rng, sizes, misses, resident)
    for maker, taker in ((ours, theirs), (theirs, ours)):
        kw = spec_problem(sizes, cap, seed)
        set_selection(kw, first, np.full(sizes.batch * sizes.steps, sizes.positions))
        maker.spec(kw)
        maker.synchronize()
        after_first = snap(kw)
        hot_tokens = [after_first["device_buffer_tokens"][int(r), :sizes.hot]
                      for r in after_first["req_pool_indices"]]
        second = spec_selection(np.random.default_rng(seed + 1), sizes, misses, resident,
                                resident_tokens=[t[t >= 0] for t in hot_tokens])
        set_selection(kw, second, np.full(sizes.batch * sizes.steps, sizes.positions))
        taker.spec(kw)
        taker.synchronize()
        remissed, dups = handoff_counts(after_first, snap(kw))
        label = f"{maker.name} -> {taker.name}"
        res.checks += [Check(f"{label}: re-missed resident tokens", remissed == 0, str(remissed)),
                       Check(f"{label}: tokens held twice", dups == 0, str(dups))]
    return res


# --- kv-canary ---------------------------------------------------------------------------------

def canary_plan_case(ours, theirs, seed: int, problems: int) -> CaseResult:
    """Random plan problems (sglang's fuzz axes) with loose, tight and one-short capacities; the
    plans start from the same poison bytes, so untouched entries compare too."""
    res = CaseResult("kv-canary plan (launch_canary_plan_kernels)", "byte for byte")
    rng = np.random.default_rng(seed)
    clamped = 0
    for i in range(problems):
        p = random_plan_problem(rng)
        pool, lens = p.req_to_verify_expected_tokens, p.req_to_verify_expected_tokens_valid_lens
        if pool is not None and lens is not None and np.any(lens > pool.shape[1]):
            # outside sglang's contract: it bounds the gather by valid_lens alone and reads into
            # the next pool row, where this project returns the -1 sentinel
            p.req_to_verify_expected_tokens_valid_lens = np.minimum(lens, pool.shape[1])
            clamped += 1
        kind = ("loose", "tight", "under_by_one")[i % 3]
        vc, wc = capacities(p, kind)
        plans = [allocate_plans(vc, wc) for _ in range(2)]
        for side, (vp, wp) in zip((ours, theirs), plans):
            side.canary_plan(vp, wp, p.inputs(to_device=True), vc)
            side.synchronize()
        got = [{k: device.to_host(v) for k, v in {**vp.arrays(), **wp.arrays()}.items()} for vp, wp in plans]
        bad = [c for c in byte_checks(got[0], got[1]) if not c.ok]
        res.checks.append(Check(f"problem {i} ({kind}, bs {p.bs}, SWA window {p.swa_window_size})",
                                not bad, "; ".join(f"{c.name}: {c.detail}" for c in bad)))
    res.notes.append(f"{problems} problems; {clamped} had expected-token valid lengths beyond the pool's "
                     "width and were clamped to it (sglang reads the next row there, this project returns -1)")
    return res


def _context(num_slots, sources):
    return VerifyOrWriteContext.allocate(num_slots, real_kv_sources=sources,
                                         real_kv_hash_mode=RealKvHashMode.ALL, chain_position_assert=True)


def canary_pipeline_case(ours, theirs, seed: int) -> CaseResult:
    """plan -> verify -> write over three steps with real-KV folding, then verify after a planted
    corruption: canary buffers and counters exact, violation rows as a multiset."""
    from ..kv_canary.examples import plan_problem
    res = CaseResult("kv-canary write + verify (launch_canary_write_kernel, launch_canary_verify_kernel)",
                     "byte for byte (ring rows as a multiset)")
    rng = np.random.default_rng(seed)
    rows, width = 6, 64
    steps = [([1, 2, 3, 0, 5], [0, 0, 0, 0, 0], [9, 5, 12, 0, 7]),
             ([1, 2, 3, 0, 5], [9, 5, 12, 0, 7], [1, 1, 1, 0, 1]),
             ([1, 2, 3, 0, 5], [10, 6, 13, 0, 8], [2, 0, 1, 0, 3])]
    num_slots = rows * width + 1
    # device memory: sglang's verify/write kernels accept real-KV sources on the GPU only
    pools = [device.to_device(np.asarray(real_kv_pool(rng, num_slots))),
             device.to_device(np.asarray(real_kv_pool(rng, num_slots, page_size=1, dtype=np.float16)))]
    sources = (RealKvSource(pools[0], 2, 64, 64), RealKvSource(pools[1], 1, 64, 32))
    ctxs = [_context(num_slots, sources), _context(num_slots, sources)]
    tokens = rng.integers(0, 50000, size=(rows, width)).astype(np.int64)
    for i, (rpi, prefix, extend) in enumerate(steps):
        p = plan_problem(rpi, prefix, extend, max_reqs=rows, max_seq_len=width)
        p.req_to_verify_expected_tokens = tokens.astype(np.int32)
        p.req_to_verify_expected_tokens_valid_lens = np.full(len(rpi), width, dtype=np.int64)
        vc = max(p.needed_verify_entries(), 1)
        args = {k: device.to_device(v) for k, v in step_inputs(p, tokens).items()}
        expected = {"expected_input_tokens": args["input_ids"], "expected_input_positions": args["positions"]}
        for side, ctx in zip((ours, theirs), ctxs):
            vp, wp = allocate_plans(vc, len(rpi))
            ours.canary_plan(vp, wp, p.inputs(to_device=True), vc)   # the same plan for both
            ours.synchronize()
            side.canary_verify(ctx, vp, True)
            side.canary_write(ctx, wp, args, expected)
            side.synchronize()
        st = [{k: device.to_host(v) for k, v in c.state_arrays().items()} for c in ctxs]
        res.checks += [Check(f"step {i + 1}: {c.name}", c.ok, c.detail) for c in ring_checks(st[0], st[1])]
    # plant corruptions (the same bytes in both buffers), then verify the whole history again
    first = plan_problem(*steps[0], max_reqs=rows, max_seq_len=width)
    written = step_inputs(first, tokens)["out_cache_loc"]
    for ctx in ctxs:
        buf = device.to_host(ctx.canary_buf)
        buf[written[3], 0] ^= 0xFF                  # a token field
        buf[written[10], 8] ^= 0x01                 # a position field
        ctx.canary_buf[...] = device.to_device(buf)
    p = plan_problem([1, 2, 3, 0, 5], [12, 7, 14, 0, 11], [0, 0, 0, 0, 0], max_reqs=rows, max_seq_len=width)
    vc = max(p.needed_verify_entries(), 1)
    for side, ctx in zip((ours, theirs), ctxs):
        vp, wp = allocate_plans(vc, 5)
        ours.canary_plan(vp, wp, p.inputs(to_device=True), vc)
        ours.synchronize()
        side.canary_verify(ctx, vp, False)
        side.synchronize()
    st = [{k: device.to_host(v) for k, v in c.state_arrays().items()} for c in ctxs]
    found = int(st[0]["violation_write_index"][0]), int(st[1]["violation_write_index"][0])
    res.notes.append(f"violations after the planted corruption: ours {found[0]}, sglang {found[1]}")
    res.checks += [Check(f"after corruption: {c.name}", c.ok, c.detail) for c in ring_checks(st[0], st[1])]
    return res


# --- timing ------------------------------------------------------------------------------------

def time_pair(ours, theirs, call: str, kw: dict, iters: int) -> dict:
    """GPU ms per call of each side by one method: CUDA events around ``iters`` back-to-back
    (restore inputs + call) pairs, minus the same loop of restores alone; and the host's wall
    time of one synchronised call (its launch cost included)."""
    import time

    from ..bench.harness import gpu_time_ms
    backup = clone_kw(kw)
    work = clone_kw(kw)
    restore_ms = gpu_time_ms(lambda: restore(work, backup), iters=iters)
    out = {}
    for side in (ours, theirs):
        fn = getattr(side, call)
        try:                       # one checked call first, so that a fault names its side
            restore(work, backup)
            fn(work)
            side.synchronize()
        except Exception as e:
            raise RuntimeError(f"{side.name} {call} failed: {type(e).__name__}: {e}") from e
        total = gpu_time_ms(lambda: (restore(work, backup), fn(work)), iters=iters)
        walls = []
        for _ in range(5):
            restore(work, backup)
            side.synchronize()
            t0 = time.perf_counter()
            fn(work)
            side.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
        out[side.name] = (max(total - restore_ms, 0.0), float(np.median(walls)))
    return out
