"""``hisparse-numba bench spec``: the speculative swap-in at sglang's benchmark configuration.

sglang's kernel benchmark: 4 steps x top_k 2048 (8192 occurrences per request), hot buffer 4096,
64-slot extra page, 576-byte items, scratch 4096 per request. Steps 0 and 1 each bring 196 fresh
misses; steps 2 and 3 reuse one miss of step 0 / step 1 plus 195 fresh ones: 782 unique misses per
request. Before every call the miss tails move on by 800 positions, so every call has fresh misses.
Each request has its own host rows. Compared, per batch size:

* ``lru_1_full``: four single-step LRU calls (block 1024), one per step;
* ``spec_1_full``: one speculative call (one index layer);
* ``spec_4_full``: speculative calls for 4 independent index layers (own state each);
* ``spec_1_full_3_shared``: one anchor call recording the plan + 3 ``copy_cache_planned_mla``
  replays (``num_blocks=8``).

GPU time is CUDA events around back-to-back calls (the per-call selection update, a 2 MB device
copy, is timed alone and subtracted). ``gpu_us`` times the public calls (default checks: each call
waits for its value check's verdict, so calls do not queue ahead of the GPU); ``kernel_us`` times
the same work launched on arguments checked once (``launch_unchecked``), as sglang's launcher runs:
the figure its 28 / 92 / 613 us compare with; ``graph_us`` (``spec_1_full`` only) the same
launches replayed from one captured CUDA graph, as sglang's decode loop runs them (its 25.9 us at
batch 1). Before timing, every kernel configuration the chosen batches launch is compiled in
parallel processes (``warmup.bench_spec_tasks``). The floor is the
bytes that must cross PCIe (unique misses x item size x layers) at the measured pinned
host-to-device memcpy bandwidth; ``floor %`` is
floor time / GPU time. ``zc_us`` is the same unique misses (the anchor's last miss plan, x
layers) copied by the harness's zero-copy gather with no decisions at all, and ``zc_pct`` its
floor %: what any kernel that decides its copies on the GPU can reach at best. For scale,
sglang's C++ launch pair (gather, then commit): 28 us (batch 1), 92 us (batch 8), 613 us
(batch 64).

``--versions`` times the kernel ladder instead (``ladder.py``: every rung of
``speculative/versions.py``, checked against the reference first, at batch 1, 8 and 64);
``--check-only`` checks every rung at small sizes and times nothing (the simulator too).
"""

from __future__ import annotations

import numpy as np

from .. import device
from ..hisparse.speculative.examples import make_spec_problem, set_selection, wrong_items, snapshot
from . import ladder
from .harness import gpu_time_ms, h2d_pinned_gbps, print_table, require_gpu, zero_copy_gather_ms

NUM_STEPS, TOP_K, HOT, PAGE = 4, 2048, 4096, 64
ITEM_WORDS = 72
MISS_PER_STEP, UNIQUE_MISSES, MISS_ADVANCE = 196, 782, 800
SCRATCH = 4096
SGLANG_US = {1: 28.0, 8: 92.0, 64: 613.0}
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_VARIANTS = ("lru_1_full", "spec_1_full", "spec_4_full", "spec_1_full_3_shared")


def add_arguments(parser) -> None:
    parser.add_argument("--batches", type=int, nargs="+", default=list(DEFAULT_BATCHES),
                        help="batch sizes to time (default: 1 2 4 8 16 32 64)")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per figure (default 20)")
    parser.add_argument("--variants", nargs="+",
                        default=list(DEFAULT_VARIANTS),
                        help="what to time: lru_1_full (four single-step calls), spec_1_full (one "
                             "speculative call), spec_4_full (four index layers), spec_1_full_3_shared "
                             "(an anchor call plus three plan replays); default all four")
    ladder.add_arguments(parser)


def selections(batch: int, calls: int, hits_base: int = 0) -> np.ndarray:
    """``[calls, batch, steps, top_k]`` selections (module docstring), positions >= HOT miss."""
    hits = TOP_K - MISS_PER_STEP
    out = np.empty((calls, batch, NUM_STEPS, TOP_K), dtype=np.int32)
    for c in range(calls):
        base = HOT + c * MISS_ADVANCE
        fresh = iter(range(base, base + 4 * MISS_PER_STEP))
        m = [[next(fresh) for _ in range(MISS_PER_STEP)] for _ in range(2)]
        m += [[m[s][0]] + [next(fresh) for _ in range(MISS_PER_STEP - 1)] for s in range(2)]
        assert len({t for row in m for t in row}) == UNIQUE_MISSES
        for s in range(NUM_STEPS):
            out[c, :, s] = np.concatenate([(hits_base + s + np.arange(hits)) % HOT, m[s]])
    return out


def run(args) -> int:
    if ladder.requested(args):
        return ladder.run(ladder.SPEC, args)
    require_gpu("spec")
    from ..hisparse.single_step import planned_copy
    from ..hisparse.speculative import (check_speculative, launch_unchecked,
                                        load_cache_to_device_buffer_spec_mla)
    from ..warmup import bench_spec_tasks, warmup
    from .startup import spec_call

    warmup("bench spec", tasks=bench_spec_tasks(args.batches, args.variants))
    xp = device.xp
    h2d = h2d_pinned_gbps()
    item = 8 * ITEM_WORDS
    print(f"pinned H2D memcpy: {h2d:.1f} GB/s; 4 x 2048 occurrences, H {HOT}, {UNIQUE_MISSES} "
          f"unique misses of {item} B per request and layer")
    rows = []
    for batch in args.batches:
        calls = args.iters + 8
        sel = xp.asarray(selections(batch, calls))
        positions = HOT + calls * MISS_ADVANCE + 4 * MISS_PER_STEP + 16
        layers = [make_spec_problem(batch=batch, steps=NUM_STEPS, top_k=TOP_K, hot=HOT, tail=PAGE,
                                    item_words=ITEM_WORDS, scratch_capacity=SCRATCH,
                                    max_positions=positions, record=(i == 0))
                  for i in range(4)]
        for kw in layers:
            set_selection(kw, device.to_host(sel[0]), np.full(batch * NUM_STEPS, positions))
        counter = {"i": 0}

        def next_selection():
            i = counter["i"] = (counter["i"] + 1) % calls
            for kw in layers:
                kw["top_k_tokens"][...] = sel[i]

        def spec(n_layers):
            def fn():
                next_selection()
                for kw in layers[:n_layers]:
                    load_cache_to_device_buffer_spec_mla(**kw)
            return fn

        def spec_kernels(n_layers):
            checked = [check_speculative(**spec_call(kw)) for kw in layers[:n_layers]]

            def fn():
                next_selection()
                for call in checked:
                    launch_unchecked(call)
            return fn

        def shared():
            next_selection()
            kw = layers[0]
            load_cache_to_device_buffer_spec_mla(**kw)
            for skip in layers[1:]:   # the anchor's plan is trusted: replay without host checks
                planned_copy.launch_unchecked(planned_copy.PlannedCopyCall(
                    num_real=batch, num_blocks=8, block_size=1024, skip_io=False, item_size_bytes=item,
                    miss_src=kw["miss_src"], miss_dst=kw["miss_dst"], miss_count=kw["miss_count"],
                    num_real_reqs=kw["num_real_reqs"], host_cache=skip["host_cache"],
                    device_buffer=skip["device_buffer"]))

        variants = {"spec_1_full": (spec(1), 1), "spec_4_full": (spec(4), 4),
                    "spec_1_full_3_shared": (shared, 4)}
        kernels_only = {name: spec_kernels(n) for name, n in (("spec_1_full", 1), ("spec_4_full", 4))
                        if name in args.variants}
        if "lru_1_full" in args.variants:
            lru = _lru_variant(batch, sel, calls, positions)
            if lru is not None:
                variants["lru_1_full"] = (lru, 1)
        sel_ms = gpu_time_ms(next_selection, iters=args.iters)
        spec(1)()                  # one call records the anchor's miss plan
        zc_ms = _zero_copy_ms(layers[0], layers[1], batch, item, args.iters)
        for name in args.variants:
            if name not in variants:
                continue
            fn, n_layers = variants[name]
            ms = gpu_time_ms(fn, iters=args.iters) - sel_ms * (name != "lru_1_full")
            kernel_us = graph_us = float("nan")
            if name in kernels_only:
                kernel_us = (gpu_time_ms(kernels_only[name], iters=args.iters) - sel_ms) * 1e3
            if name == "spec_1_full":
                graph_us = _graph_call_us(layers[0], sel, calls)
            floor_us = batch * UNIQUE_MISSES * item * n_layers / (h2d * 1e9) * 1e6
            us = ms * 1e3
            zc_us = zc_ms * 1e3 * n_layers
            rows.append(dict(variant=name, batch=batch, gpu_us=us, kernel_us=kernel_us, graph_us=graph_us,
                             floor_us=floor_us,
                             floor_pct=100 * floor_us / us, zc_us=zc_us,
                             zc_pct=100 * floor_us / zc_us,
                             gbps=batch * UNIQUE_MISSES * item * n_layers / (us * 1e-6) / 1e9,
                             sglang_us=(f"{SGLANG_US[batch]:.0f}" if batch in SGLANG_US and name == "spec_1_full" else "-")))
        device.synchronize()
        bad = wrong_items(snapshot(layers[0]), ITEM_WORDS)
        if bad:
            print(f"batch {batch}: {len(bad)} wrong items after timing (first {bad[:3]})")
            return 1
        layers = sel = None   # free the batch's buffers before the next one
        xp.get_default_memory_pool().free_all_blocks()
    print_table(rows, ["variant", "batch", "gpu_us", "kernel_us", "graph_us", "floor_us", "floor_pct", "zc_us",
                       "zc_pct", "gbps", "sglang_us"])
    return 0


def _graph_call_us(kw, sel, calls: int, version=None) -> float:
    """GPU microseconds per speculative call replayed from a CUDA graph, as sglang's decode loop
    runs it: one graph holds ``calls`` calls, each a selection copy and a launch on arguments
    checked once; the copies alone, captured the same way, are subtracted. ``version``: the rung
    of the kernel ladder (None: the tuned one)."""
    from ..hisparse.speculative import check_speculative, launch_unchecked
    from .startup import spec_call

    call = check_speculative(**spec_call(kw))
    launch = launch_unchecked if version is None else (lambda c: launch_unchecked(c, version=version))

    def copies(with_launches: bool):
        for i in range(calls):
            kw["top_k_tokens"][...] = sel[i]
            if with_launches:
                launch(call)

    with_calls = device.capture_graph(lambda: copies(True))
    copies_only = device.capture_graph(lambda: copies(False))
    ms = gpu_time_ms(with_calls.replay, iters=3, warmup=1) - gpu_time_ms(copies_only.replay, iters=3, warmup=1)
    return ms * 1e3 / calls


def _zero_copy_ms(anchor, other, batch, item, iters) -> float:
    """GPU ms of the harness's zero-copy gather of the anchor's last miss plan into ``other``'s
    device buffer (same host rows, same bytes as one speculative call), checked afterwards."""
    device.synchronize()
    count = device.to_host(anchor["miss_count"])[:batch]
    if (count != UNIQUE_MISSES).any():
        raise SystemExit(f"bench spec: miss_count {sorted(set(count.tolist()))}, expected {UNIQUE_MISSES}")
    src_h = device.to_host(anchor["miss_src"])[:batch, :UNIQUE_MISSES].astype(np.int64).ravel()
    dst_h = device.to_host(anchor["miss_dst"])[:batch, :UNIQUE_MISSES].astype(np.int64).ravel()
    src, dst = device.to_device(src_h), device.to_device(dst_h)
    ms = zero_copy_gather_ms(other["host_cache"], other["device_buffer"], src, dst, item, iters)
    device.synchronize()
    host = np.asarray(other["host_cache"]).reshape(-1).view(np.uint8).reshape(-1, item)
    dev = device.to_host(other["device_buffer"]).reshape(-1).view(np.uint8).reshape(-1, item)
    if not np.array_equal(dev[dst_h], host[src_h]):
        raise SystemExit("bench spec: the zero-copy gather copied wrong bytes")
    return ms


def _lru_variant(batch, sel, calls, positions):
    """Four single-step LRU calls per speculative call (None if the single-step API differs).

    The first call goes through the public launcher (validation); timed calls launch the kernel
    on pre-converted arguments, since validation copies rows to the host and would serialise.
    """
    from ..hisparse import single_step as si
    xp = device.xp
    kw = make_spec_problem(batch=batch, steps=NUM_STEPS, top_k=TOP_K, hot=HOT, tail=PAGE,
                           item_words=ITEM_WORDS, scratch_capacity=SCRATCH, max_positions=positions)
    n = kw["device_buffer_tokens"].shape[0]
    lru = xp.tile(xp.arange(HOT, dtype=xp.int16), (n, 1))
    out = xp.zeros((batch, TOP_K), dtype=xp.int32)
    seq = xp.full(batch, positions, dtype=xp.int32)
    step_tokens = xp.zeros((batch, TOP_K), dtype=xp.int32)
    counter = {"i": 0}

    num_real = xp.asarray(np.array([batch], np.int32))
    call = si.SwapInCall(
        batch=batch, num_real=batch, num_top_k=TOP_K, hot_buffer_size=HOT, block_size=1024,
        record_plan=False, skip_io=False, item_size_bytes=8 * ITEM_WORDS, top_k_tokens=step_tokens,
        device_buffer_tokens=kw["device_buffer_tokens"], host_cache_locs=kw["host_cache_locs"],
        device_buffer_locs=kw["device_buffer_locs"], host_cache=kw["host_cache"],
        device_buffer=kw["device_buffer"], top_k_device_locs=out, req_pool_indices=kw["req_pool_indices"],
        seq_lens=seq, lru_slots=lru, num_real_reqs=num_real)
    args = si.kernel_args(call)

    def fn():
        i = counter["i"] = (counter["i"] + 1) % calls
        for s in range(NUM_STEPS):
            step_tokens[...] = sel[i, :, s]
            si.launch_unchecked(call, args)

    try:
        step_tokens[...] = sel[0, :, 0]
        si.load_cache_to_device_buffer_mla(
            top_k_tokens=step_tokens, device_buffer_tokens=kw["device_buffer_tokens"],
            host_cache_locs=kw["host_cache_locs"], device_buffer_locs=kw["device_buffer_locs"],
            host_cache=kw["host_cache"], device_buffer=kw["device_buffer"], top_k_device_locs=out,
            req_pool_indices=kw["req_pool_indices"], seq_lens=seq, lru_slots=lru,
            num_real_reqs=num_real, item_size_bytes=8 * ITEM_WORDS, num_top_k=TOP_K,
            hot_buffer_size=HOT, block_size=1024)
        fn()
        device.synchronize()
    except Exception as e:  # noqa: BLE001 - the comparison row is optional
        print(f"lru_1_full skipped: {type(e).__name__}: {e}")
        return None
    return fn
