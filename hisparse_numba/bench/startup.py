"""``hisparse-numba bench startup``: where a GPU user's time goes before and around the kernels.

Each rung of the kernel ladders and the cold lessons flow (``make lessons``: the first lesson
kernel, and every lesson done), in fresh processes with an empty kernel cache: ``startup_flow``.
Per kernel family, each in a fresh process: the cold start (an empty kernel cache directory:
every specialisation is compiled) and the warm start (the same directory again: every
specialisation is loaded from disk), reported as import time and the first call of the family's
``compile_examples()``. Then, in this process at sglang's sizes, the split of one public call:
host argument checks (shape and value checks as the launchers run them today), argument
marshalling and launch through ``device.launch`` (cached fast path) and through Numba's own
path (``device.launch_plain``, the "before" figure), the wall time of a synchronised public
call and the kernel's GPU time (CUDA events). Times are medians over repeated calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FAMILIES = {
    "gather": ("hisparse_numba.compile_check", "compile_gather"),
    "swap-in": ("hisparse_numba.hisparse.single_step.examples", "compile_examples"),
    "speculative": ("hisparse_numba.hisparse.speculative.examples", "compile_examples"),
    "kv-canary": ("hisparse_numba.kv_canary.examples", "compile_examples"),
}


PARTS = ("families", "rungs", "flow", "split")


def add_arguments(parser) -> None:
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated families")
    parser.add_argument("--batch", default="1,64", help="comma-separated batches of the call split (swap-in, speculative)")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per figure (default 20)")
    parser.add_argument("--no-fresh", action="store_true", help="skip the cold/warm subprocesses "
                        "(the families', the rungs' and the lessons flow)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, of {', '.join(PARTS)} (default: all): the families' cold "
                        "and warm compile, each rung's, the cold lessons flow (first lesson kernel, "
                        "end to end), the split of one call")
    parser.add_argument("--flow-lessons", default="", help="comma-separated lesson ids of the flow "
                        "(default: every lesson)")
    parser.add_argument("--markdown", metavar="FILE", default=None,
                        help="write the rungs' and the flow's table between <!-- startup:begin --> and "
                        "<!-- startup:end --> in FILE (e.g. docs/performance.md)")
    parser.add_argument("--child", help=argparse_hidden())


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


def child(family: str) -> dict:
    """Run in a fresh process: the first and second call of the family's examples."""
    import importlib

    from .. import device

    module, name = FAMILIES[family]
    fn = getattr(importlib.import_module(module), name)
    t1 = time.perf_counter()
    fn()
    device.synchronize()
    t_first = time.perf_counter() - t1
    t2 = time.perf_counter()
    fn()
    device.synchronize()
    t_second = time.perf_counter() - t2
    return {"first_s": t_first, "again_s": t_second,
            "entries": device.kernel_cache_info()["entries"]}


def fresh_process(family: str, cache_dir: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "hisparse_numba.bench.startup", "--child", family],
                         env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{family}: child failed\n{out.stderr[-3000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["process_s"] = wall
    row["startup_s"] = wall - row["first_s"] - row["again_s"]  # interpreter, imports, CUDA context
    return row


def median_us(fn, iters: int) -> float:
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    samples.sort()
    return samples[len(samples) // 2]


def bare_launch_split(iters: int) -> dict:
    """A kernel with 6 CuPy arrays and 3 scalars, the launch alone: fast path and Numba's path."""
    from .. import device
    from ..device import cuda

    @cuda.jit
    def six_arrays(a, b, c, d, e, f, n, x, y):
        i = cuda.grid(1)
        if i < n:
            a[i] = b[i] + c[i] + d[i] + e[i] + f[i] + x + y

    xp = device.xp
    arrays = [xp.zeros(1024, xp.float32) for _ in range(6)]
    args = (*arrays, 1024, 1.0, xp.float32(2.0))
    device.launch(six_arrays, 4, 256, *args)
    device.launch_plain(six_arrays, 4, 256, *args)
    device.synchronize()
    row = {"family": "bare (6 arrays, 3 scalars)", "batch": 0}
    row["checks_us"] = row["shape_checks_us"] = 0.0
    row["launch_us"] = median_us(lambda: device.launch(six_arrays, 4, 256, *args), 200)
    row["plain_launch_us"] = median_us(lambda: device.launch_plain(six_arrays, 4, 256, *args), 200)
    device.synchronize()
    row["call_us"] = row["call_shapes_us"] = row["call_host_us"] = float("nan")
    row["kernel_us"] = row["check_gpu_us"] = float("nan")
    return row


def swap_in_split(batch: int, iters: int) -> dict:
    """sglang's single-step benchmark shape: top_k 2048, hot 4096, 512-byte items, 20% misses."""
    from .. import device
    from . import harness
    from ..hisparse import single_step as si
    from ..hisparse.single_step.value_checks import start_swap_in_check
    from .swap_in import Workload

    w = Workload(batch, 2048, 4096, 512, 0.2, 1024)
    w.call()
    device.synchronize()
    kw = w.kwargs(w.queries[0])
    full = dict(kw, num_real_reqs=None, miss_src=None, miss_dst=None, miss_count=None)
    full.pop("skip_io", None)
    kernel = si.swap_in_kernel(w.K, w.H, w.block_size, False, False)
    args = w.prepared[0]
    row = {"family": "swap-in", "batch": batch}
    row["checks_us"] = median_us(lambda: si.check_swap_in(**full), iters)
    row["shape_checks_us"] = median_us(lambda: si.check_swap_in(**full, checks="shapes"), iters)
    row["launch_us"] = median_us(lambda: device.launch(kernel, batch, w.block_size, *args), iters)
    row["plain_launch_us"] = median_us(lambda: device.launch_plain(kernel, batch, w.block_size, *args), iters)
    device.synchronize()
    row["call_us"] = harness.call_latency_us(w.call, iters=iters)
    row["call_host_us"] = harness.call_host_us(w.call, iters=iters)
    row["call_shapes_us"] = harness.call_latency_us(lambda: w.call(checks="shapes"), iters=iters)
    row["kernel_us"] = harness.gpu_time_ms(w.launch, iters=iters) * 1e3
    shapes_checked = si.check_swap_in(**full, checks="shapes")
    row["check_gpu_us"] = harness.check_pass_gpu_us(lambda: start_swap_in_check(shapes_checked), iters)
    return row


def speculative_problem(batch: int):
    """Keywords of a speculative swap-in: 4 steps x top_k 512, hot 4096, 576-byte items."""
    import numpy as np

    from .. import device
    from ..hisparse import speculative as sp
    from ..hisparse.speculative.examples import make_spec_problem, set_selection

    steps, top_k, hot = 4, 512, 4096
    kw = make_spec_problem(batch=batch, steps=steps, top_k=top_k, hot=hot, tail=16, item_words=72,
                           max_positions=2 * (hot + steps * top_k))
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 2 * hot, (batch, steps, top_k)).astype(np.int32)
    for b in range(batch):
        for s in range(steps):
            tokens[b, s] = rng.permutation(2 * hot)[:top_k]
    set_selection(kw, tokens, np.full(batch * steps, 2 * (hot + steps * top_k)))
    sp.load_cache_to_device_buffer_spec_mla(**kw)
    device.synchronize()
    return kw


def spec_call(kw) -> dict:
    """``kw`` with the launcher's optional keywords filled in, as ``check_speculative`` takes them."""
    return dict(dict(miss_src=None, miss_dst=None, miss_count=None, item_size_bytes=None), **kw)


def speculative_split(batch: int, iters: int) -> dict:
    """The split of one speculative call (:func:`speculative_problem`)."""
    from .. import device
    from ..hisparse import speculative as sp
    from ..hisparse.speculative.value_checks import start_value_checks
    from . import harness

    kw = spec_call(speculative_problem(batch))
    call = sp.check_speculative(**kw)
    row = {"family": "speculative", "batch": batch}
    row["checks_us"] = median_us(lambda: sp.check_speculative(**kw), iters)
    row["shape_checks_us"] = median_us(lambda: sp.check_speculative(**kw, checks="shapes"), iters)
    row["launch_us"] = median_us(lambda: sp.launch_unchecked(call), iters)
    row["plain_launch_us"] = float("nan")
    device.synchronize()
    row["call_us"] = harness.call_latency_us(lambda: sp.load_cache_to_device_buffer_spec_mla(**kw),
                                             iters=iters)
    row["call_host_us"] = harness.call_host_us(lambda: sp.load_cache_to_device_buffer_spec_mla(**kw),
                                               iters=iters)
    row["call_shapes_us"] = harness.call_latency_us(
        lambda: sp.load_cache_to_device_buffer_spec_mla(**kw, checks="shapes"), iters=iters)
    row["kernel_us"] = harness.gpu_time_ms(lambda: sp.launch_unchecked(call), iters=iters) * 1e3
    row["check_gpu_us"] = harness.check_pass_gpu_us(lambda: start_value_checks(call), iters)
    return row


def first_run(args, parts: set) -> None:
    """The rungs' cold and warm compile and the cold lessons flow (``startup_flow``); with
    ``--markdown`` their table goes into FILE."""
    from . import startup_flow
    from .ladder_table import gpu_name

    rungs = startup_flow.measure_rungs() if "rungs" in parts else []
    flow = None
    if "flow" in parts:
        print("cold lessons flow (lessons run --solved --warmup, empty kernel cache):", flush=True)
        flow = startup_flow.measure_flow([i for i in args.flow_lessons.split(",") if i])
        print(f"first lesson kernel ({flow['first_kernel']}) after {flow['first_kernel_s']:.1f} s; "
              f"every lesson done after {flow['total_s']:.1f} s (rc={flow['rc']})", flush=True)
    if args.markdown and (rungs or flow):
        startup_flow.write_markdown(Path(args.markdown), startup_flow.markdown_block(rungs, flow, gpu_name()))
        print(f"wrote the startup section of {args.markdown}", flush=True)


def run(args) -> int:
    if args.child:
        print(json.dumps(child(args.child)), flush=True)
        return 0
    from .. import device
    from . import harness

    harness.require_gpu("startup")

    families = [f for f in args.families.split(",") if f]
    parts = {p for p in args.parts.split(",") if p}
    if parts - set(PARTS):
        raise SystemExit(f"--parts: unknown {', '.join(sorted(parts - set(PARTS)))}; known: {', '.join(PARTS)}")
    if args.no_fresh:
        parts -= {"families", "rungs", "flow"}
    info = device.kernel_cache_info()
    print(f"kernel cache of this process: {info['location']} ({info['entries']} entries, "
          f"{info['bytes'] / 1e6:.1f} MB, enabled={info['enabled']})", flush=True)
    bare = bare_launch_split(args.iters)
    print(f"bare launch: device.launch {bare['launch_us']:.1f} us, Numba's path "
          f"{bare['plain_launch_us']:.1f} us", flush=True)
    first_run(args, parts)
    if "families" in parts:
        rows = []
        with tempfile.TemporaryDirectory(prefix="hisparse-cache-") as tmp:
            for fam in families:
                cold = fresh_process(fam, tmp)
                warm = fresh_process(fam, tmp)
                rows.append({"family": fam, "startup_s": warm["startup_s"],
                             "cold_first_s": cold["first_s"], "warm_first_s": warm["first_s"],
                             "steady_s": warm["again_s"], "cold_process_s": cold["process_s"],
                             "warm_process_s": warm["process_s"], "entries": warm["entries"]})
                print(f"  {fam}: cold {cold['process_s']:.1f} s, warm {warm['process_s']:.1f} s",
                      flush=True)
        harness.print_table(rows, ["family", "startup_s", "cold_first_s", "warm_first_s", "steady_s",
                                   "cold_process_s", "warm_process_s", "entries"])
        print("startup_s: interpreter, imports and CUDA context of the warm process; "
              "cold: empty cache dir, fresh process (compiles); warm: same dir, fresh process (loads); "
              "first_s: the family's compile_examples() first call; steady_s: its second call", flush=True)
    split = [bare] if "split" in parts else []
    for name, fn in (("swap-in", swap_in_split), ("speculative", speculative_split)):
        if name in families and "split" in parts:
            for batch in str(args.batch).split(","):
                split.append(fn(int(batch), args.iters))
    for row in split:
        row["value_check_us"] = row["call_us"] - row["call_shapes_us"]
        row["call_x"] = row["call_us"] / row["kernel_us"]
    if split:
        harness.print_table(split, ["family", "batch", "checks_us", "shape_checks_us", "launch_us",
                                    "plain_launch_us", "call_us", "call_host_us", "call_shapes_us", "value_check_us",
                                    "check_gpu_us", "kernel_us", "call_x"])
        print("checks_us: checks=\"full\" (host shape checks + the device value pass and its verdict); "
              "shape_checks_us: checks=\"shapes\" (host only); launch_us: marshalling + enqueue via device.launch "
              "(fast path); plain_launch_us: Numba's own launch path; call_us: synchronised public call; "
              "call_host_us: the same call until it returns (its host cost, kernel not awaited); "
              "call_shapes_us: the same with checks=\"shapes\"; value_check_us: their difference (what the "
              "device value pass costs a call); check_gpu_us: GPU time of the value pass alone (the "
              "check kernel, which also writes the verdict; host enqueue held out); kernel_us: GPU "
              "time (events); "
              "call_x: call_us / kernel_us", flush=True)
    for failure in device.fast_launch_failures:
        print(f"fell back to Numba's launch path: {failure}", flush=True)
    return 0


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="python -m hisparse_numba.bench.startup")
    add_arguments(p)
    sys.exit(run(p.parse_args()))
