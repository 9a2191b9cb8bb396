"""What the speculative kernel's argument list costs a launch under CUDA-graph replay (developer
tooling, session 22; GPU only, about a minute).

The swap kernel takes 2000 bytes of parameters at batch 1 (250 of them: Numba passes each array
as meminfo, parent, size, itemsize, data, shape and strides), where a hand-written CUDA kernel
passes a few pointers. This times empty kernels with the swap kernel's grid at bench spec's batch
1 (1 x Y blocks of 1024 threads, 45 KB of static shared memory each), replayed from one CUDA graph
of ``CALLS`` launches, the way ``graph_us`` is measured:

- ``big``: the swap kernel's own argument list (``launch.kernel_args`` of bench spec's batch-1
  problem) plus one output array;
- ``small``: the output array alone;
- ``one_block``: ``small`` on a single block (the floor of a launch in a graph);
- ``big+copy`` / ``small+copy``: each launch after a copy of the selection, as ``bench spec``
  captures a call, with a graph of the copies alone subtracted.

If ``big`` is a microsecond or more above ``small``, a shorter argument list (the workspace as one
array, say) is a lead for batch 1; if not, the gap between calls is the grid's, not the
parameters'. ``HISPARSE_NUMBA_BACKEND=compile-only`` compiles both kernels to PTX and prints the
parameter counts, without a GPU.

    cd notes/timeline && python param_cost.py
"""
import os

import numpy as np

from hisparse_numba import device
from hisparse_numba.device import cuda
from hisparse_numba.hisparse.speculative import launch as L
from tl_problem import batch1_problem

CALLS = int(os.environ.get("PC_CALLS", "100"))
REPLAYS = int(os.environ.get("PC_REPLAYS", "20"))
SHARED_WORDS = 11264                     # 45056 bytes, as the swap kernel's 45088


def empty_kernel(num_args):
    """A kernel of ``num_args`` ignored arguments and an output array, whose body only touches
    its shared memory and the output (so that both stay)."""
    names = ", ".join(f"a{i}" for i in range(num_args))
    src = (f"def empty({names}{', ' if num_args else ''}out):\n"
           f"    sm = cuda.shared.array({SHARED_WORDS}, np.int32)\n"
           f"    if cuda.threadIdx.x == 0:\n"
           f"        sm[0] = cuda.blockIdx.y\n"
           f"    cuda.syncthreads()\n"
           f"    if cuda.threadIdx.x == 0 and sm[0] < 0:\n"
           f"        out[0] = sm[0]\n")
    scope = {"cuda": cuda, "np": np}
    exec(src, scope)
    return device.jit_kernel(scope["empty"])


def per_launch_us(fn):
    graph = device.capture_graph(fn)
    start, stop = device.xp.cuda.Event(), device.xp.cuda.Event()
    graph.replay()
    times = []
    for _ in range(REPLAYS):
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(device.xp.cuda.get_elapsed_time(start, stop) * 1e3 / CALLS)
    return float(np.median(times))


def main():
    p = batch1_problem(CALLS)
    args = L.kernel_args(p.call, p.work)
    out = device.xp.zeros(4, dtype=device.xp.int32)
    big, small = empty_kernel(len(args)), empty_kernel(0)
    grid, block = (p.call.batch, p.Y), p.tile
    device.launch(big, grid, block, *args, out)
    device.launch(small, grid, block, out)
    if device.COMPILE_ONLY:
        for (f, _), ptx in device.compiled_signatures.items():
            entry = ptx[ptx.index(".entry"):]
            params = entry[:entry.index(")")].count(".param")
            print(f"{f.__name__}: {params} parameters")
        return
    device.synchronize()
    tokens = p.kw["top_k_tokens"]

    def launches(kernel, kargs, g, copy):
        def fn():
            for c in range(CALLS):
                if copy:
                    tokens[...] = p.sel[c]
                device.launch(kernel, g, block, *kargs)
        return fn

    def copies_only():
        for c in range(CALLS):
            tokens[...] = p.sel[c]

    copy_us = per_launch_us(copies_only)
    rows = [("big", per_launch_us(launches(big, (*args, out), grid, False))),
            ("small", per_launch_us(launches(small, (out,), grid, False))),
            ("one_block", per_launch_us(launches(small, (out,), (1, 1), False))),
            ("big+copy", per_launch_us(launches(big, (*args, out), grid, True)) - copy_us),
            ("small+copy", per_launch_us(launches(small, (out,), grid, True)) - copy_us)]
    print(f"grid {grid} x {block} threads; {CALLS} launches a graph, median of {REPLAYS} replays; "
          f"copies alone {copy_us:.2f} us a call")
    for name, us in rows:
        print(f"{name:>11} {us:7.2f} us a launch")


if __name__ == "__main__":
    main()
