"""Timing harness for the GPU benchmarks: CUDA events and measured hardware ceilings.

Kernel time is measured with CUDA events around ``iters`` back-to-back calls after a warm-up,
so the first call's compilation stays out. A Numba launch costs the host 50-150 us, longer than
a small kernel runs, so the calls are queued behind a *hold* kernel that sleeps on the GPU until
the host has enqueued them all: the events then see the kernels run back to back, not the
host's launch rate. Per-call latency (host launch + GPU + any validation) is measured separately
with a host clock around one synchronised call. Ceilings are measured in the same
process: a pinned host-to-device ``cudaMemcpy`` (the physical floor for miss copies), a large
device-to-device copy, and a zero-copy gather of given host rows (``zero_copy_gather_ms``): the
fastest way measured here for SM threads to pull scattered items over PCIe, which is the real
ceiling for a kernel that decides its copies on the GPU (about 91% of the memcpy on an H200).
"""

from __future__ import annotations

import time

from .. import device
from ..device import cuda
from ..itemcopy import copy_items_flat_dev

HOLD_MS_PER_CALL = 1.0


def hold_ms(calls: int, host_ms_per_call: float) -> int:
    """How long the hold kernel must last for the host to enqueue ``calls`` calls behind it."""
    return int(calls * max(HOLD_MS_PER_CALL, 2.0 * host_ms_per_call)) + 2


@cuda.jit
def hold_kernel(milliseconds):
    """Keep the stream busy for about ``milliseconds`` (nanosleep is approximate)."""
    for _ in range(milliseconds * 10):
        cuda.nanosleep(100000)


def check_pass_gpu_us(start, iters: int = 20) -> float:
    """Median GPU microseconds of one value-check pass (``start()`` returns its
    ``value_flags.ValueCheck``: the check kernel, whose last block writes the verdict), timed by
    CUDA events while ``hold_kernel`` keeps the stream busy, so that no host enqueue time lands
    between them."""
    cp = device.xp
    samples = []
    for _ in range(iters):
        device.launch(hold_kernel, 1, 1, 1)
        begin, end = cp.cuda.Event(), cp.cuda.Event()
        begin.record()
        check = start()
        end.record()
        check.verdict()
        samples.append(cp.cuda.get_elapsed_time(begin, end) * 1e3)
    samples.sort()
    return samples[len(samples) // 2]


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


def call_host_us(fn, iters: int = 20) -> float:
    """Median wall-clock microseconds until ``fn`` returns, from an idle device (what a call costs
    the host: with the default checks that includes waiting for its value check, not its kernel)."""
    samples = []
    for _ in range(iters):
        device.synchronize()
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    device.synchronize()
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


ZERO_COPY_THREADS = 256
ZERO_COPY_BLOCKS_PER_SM = 8


@cuda.jit
def zero_copy_gather_kernel(src_words, src_locs, dst_words, dst_locs, words_per_item):
    copy_items_flat_dev(src_words, src_locs, 0, dst_words, dst_locs, 0, src_locs.shape[0],
                    words_per_item, cuda.grid(1), cuda.gridsize(1))


def zero_copy_gather_ms(host_cache, device_buffer, src_locs, dst_locs, item_size_bytes: int,
                        iters: int = 20) -> float:
    """GPU milliseconds to copy host items ``src_locs`` to device rows ``dst_locs``, no decisions.

    The whole GPU walks the flattened (item, word) space with four 8-byte loads in flight per
    thread (``itemcopy.copy_items_flat_dev``), 8 blocks of 256 threads per SM: the fastest of the
    grids and load widths tried on the H200 (16-byte loads and TMA bulk copies were not faster).
    src_locs, dst_locs: ``[n]`` int64 device arrays, ``dst_locs`` distinct.
    """
    words = item_size_bytes // 8
    blocks = min(-(-int(src_locs.shape[0]) * words // ZERO_COPY_THREADS),
                 ZERO_COPY_BLOCKS_PER_SM * device.sm_count())
    src_words, dst_words = device.byte_words(host_cache), device.byte_words(device_buffer)
    return gpu_time_ms(lambda: device.launch(zero_copy_gather_kernel, blocks, ZERO_COPY_THREADS,
                                             src_words, src_locs, dst_words, dst_locs, words),
                       iters=iters)


def print_table(rows, columns) -> None:
    """Print dict rows as an aligned table with the given column keys."""
    cells = [[str(c) for c in columns]]
    for row in rows:
        cells.append([row[c] if isinstance(row[c], str) else f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for r in cells:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)), flush=True)
