"""Timing harness for the GPU benchmarks: CUDA events and measured hardware ceilings.

Kernel time is measured with CUDA events around ``iters`` back-to-back calls after a warm-up,
so the first call's compilation stays out. A Numba launch costs the host 50-150 us, longer than
a small kernel runs, so the calls are queued behind a *hold* kernel that sleeps on the GPU until
the host has enqueued them all: the events then see the kernels run back to back, not the
host's launch rate. Per-call latency (host launch + GPU + any validation) is measured separately
with a host clock around one synchronised call. Ceilings are measured in the same
process: a pinned host-to-device ``cudaMemcpy`` (the physical floor for miss copies) and a large
device-to-device copy.
"""

from __future__ import annotations

import time

from .. import device
from ..device import cuda

HOLD_MS_PER_CALL = 1.0


def hold_ms(calls: int, host_ms_per_call: float) -> int:
    """How long the hold kernel must last for the host to enqueue ``calls`` calls behind it."""
    return int(calls * max(HOLD_MS_PER_CALL, 2.0 * host_ms_per_call)) + 2


@cuda.jit
def hold_kernel(milliseconds):
    """Keep the stream busy for about ``milliseconds`` (nanosleep is approximate)."""
    for _ in range(milliseconds * 10):
        cuda.nanosleep(100000)


def require_gpu(name: str) -> None:
    if device.backend() != "cuda":
        raise SystemExit(
            f"hisparse-numba bench {name} needs a CUDA GPU (backend is {device.backend()!r}); "
            "the simulator runs kernels as Python threads and its times mean nothing"
        )


def gpu_time_ms(fn, iters: int = 20, warmup: int = 3, hold: bool = True) -> float:
    """GPU milliseconds per call of ``fn``: CUDA events around ``iters`` back-to-back calls.

    ``fn`` must only enqueue work (no host synchronisation). With ``hold`` the calls queue
    behind ``hold_kernel`` so that host launch overhead stays out of the window.
    """
    cp = device.xp
    fn()                       # compiles on the first call
    device.synchronize()
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    host_ms = (time.perf_counter() - t0) * 1e3 / max(warmup, 1)
    device.synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    if hold:
        device.launch(hold_kernel, 1, 1, hold_ms(iters, host_ms))
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / iters


def call_latency_us(fn, iters: int = 20) -> float:
    """Median wall-clock microseconds of one call followed by a device synchronisation."""
    samples = []
    for _ in range(iters):
        device.synchronize()
        t0 = time.perf_counter()
        fn()
        device.synchronize()
        samples.append((time.perf_counter() - t0) * 1e6)
    samples.sort()
    return samples[len(samples) // 2]


def h2d_pinned_gbps(nbytes: int = 1 << 30, iters: int = 10) -> float:
    """Pinned host-to-device ``cudaMemcpy`` bandwidth in GB/s (1e9 bytes per second)."""
    cp = device.xp
    host = cp.cuda.alloc_pinned_memory(nbytes)
    dst = cp.empty(nbytes, dtype=cp.uint8)

    rt = cp.cuda.runtime

    def copy():
        rt.memcpyAsync(dst.data.ptr, host.ptr, nbytes, rt.memcpyHostToDevice,
                       cp.cuda.get_current_stream().ptr)

    ms = gpu_time_ms(copy, iters=iters, warmup=2)
    return nbytes / (ms * 1e-3) / 1e9


def d2d_gbps(nbytes: int = 2 << 30, iters: int = 10) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    cp = device.xp
    src = cp.ones(nbytes, dtype=cp.uint8)
    dst = cp.empty_like(src)
    ms = gpu_time_ms(lambda: dst.__setitem__(Ellipsis, src), iters=iters, warmup=2)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def print_table(rows, columns) -> None:
    """Print dict rows as an aligned table with the given column keys."""
    cells = [[str(c) for c in columns]]
    for row in rows:
        cells.append([row[c] if isinstance(row[c], str) else f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for r in cells:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)), flush=True)
