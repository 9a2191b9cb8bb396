"""``hisparse-numba bench graph``: a decode step's swap-ins captured once in a CUDA graph and replayed.

sglang replays a captured CUDA graph per decode step, so the host pays one graph launch instead
of one launch per kernel. Here the step is the speculative swap-in repeated for ``--layers``
layers (one problem shared by the layers) and, separately, one single-step swap-in, both on
arguments checked once (``launch_unchecked``), captured with
``device.capture_graph``. Printed per batch: host microseconds to enqueue the step eagerly and
as one graph replay, and GPU microseconds per swap-in both ways (CUDA events).
"""

from __future__ import annotations

import time

from . import harness


def add_arguments(parser) -> None:
    parser.add_argument("--batches", default="1,8,64", help="comma-separated batch sizes (default 1,8,64)")
    parser.add_argument("--layers", type=int, default=8, help="speculative swap-ins per captured step (default 8)")
    parser.add_argument("--iters", type=int, default=20, help="timed steps per figure (default 20)")


def _host_us(fn, iters):
    from .. import device

    device.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    host = (time.perf_counter() - t0) * 1e6 / iters
    device.synchronize()
    return host


def measure(name, batch, layers, step_once, iters):
    """Eager and graph figures for ``layers`` calls of ``step_once``."""
    from .. import device

    def eager():
        for _ in range(layers):
            step_once()

    eager()
    device.synchronize()
    graph = device.capture_graph(eager)
    return {"kernel": name, "batch": batch, "layers": layers,
            "eager_host_us": _host_us(eager, iters), "graph_host_us": _host_us(graph.replay, iters),
            "eager_gpu_us": harness.gpu_time_ms(eager, iters=iters) * 1e3 / layers,
            "graph_gpu_us": harness.gpu_time_ms(graph.replay, iters=iters) * 1e3 / layers}


def run(args) -> int:
    harness.require_gpu("graph")
    from ..hisparse import speculative as sp
    from ..hisparse import single_step as si
    from .startup import spec_call, speculative_problem
    from .swap_in import Workload

    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        kw = spec_call(speculative_problem(batch))
        call = sp.check_speculative(**kw)
        rows.append(measure("speculative", batch, args.layers,
                            lambda: sp.launch_unchecked(call), args.iters))
        w = Workload(batch, 2048, 4096, 512, 0.2, 1024)
        rows.append(measure("swap-in", batch, 1, lambda: si.launch_unchecked(w.calls[0], w.prepared[0]),
                            args.iters))
        print(f"  batch {batch}: done", flush=True)
    harness.print_table(rows, ["kernel", "batch", "layers", "eager_host_us", "graph_host_us",
                               "eager_gpu_us", "graph_gpu_us"])
    print("host_us: host time to enqueue one step (all layers); gpu_us: GPU time per swap-in "
          "(events around back-to-back steps)", flush=True)
    return 0


if __name__ == "__main__":
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m hisparse_numba.bench.graph")
    add_arguments(p)
    sys.exit(run(p.parse_args()))
