"""``hisparse-numba bench swap-in``: the single-step swap-in at sglang's benchmark shape.

Shape (``docs/single-step-swap-in.md#benchmark-shape``): top_k 2048, 512-byte items, hot buffer 4096,
miss rate 0.2 (410 misses per request), block 1024; batch 1 to 64. Tags start as
``arange(H)``; hits are positions ``0..hits-1``. Every request owns its host rows (so no host
item is read twice and the PCIe figure is honest) and its ``H + 1`` device rows.

Instead of resetting tags and LRU between calls (sglang's benchmark times those resets too),
consecutive calls select different miss windows ``H + w * misses + [0, misses)``, cycling over
enough windows that a window has left the hot buffer before it comes back: every call has
exactly ``misses`` misses per request (checked after timing from a recorded plan).

Printed per batch: kernel time (CUDA events around back-to-back launches of pre-converted
arguments), per-call latency of the public launcher (validation included) and of a bare launch,
miss bytes per second, and that rate as a fraction of the pinned host-to-device memcpy
bandwidth measured in the same run.

``--versions`` times the kernel ladder instead (``ladder.py``: every rung of
``single_step/versions.py``, checked against the reference first, at batch 1, 8 and 64);
``--check-only`` checks every rung at small sizes and times nothing (the simulator too).
"""

from __future__ import annotations

import math

import numpy as np

from .. import device
from ..hisparse import single_step as si
from . import harness, ladder


def add_arguments(parser) -> None:
    parser.add_argument("--batches", default="1,2,4,8,16,32,64", help="comma-separated batch sizes")
    parser.add_argument("--top-k", type=int, default=2048, help="selected positions per request (default 2048)")
    parser.add_argument("--hot-buffer", type=int, default=4096, help="hot slots per request (default 4096)")
    parser.add_argument("--item-size", type=int, default=512, help="bytes per item (multiple of 16)")
    parser.add_argument("--miss-rate", type=float, default=0.2, help="share of the top-k that misses (default 0.2)")
    parser.add_argument("--block-size", type=int, default=1024, help="threads per block (default 1024)")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per figure (default 20)")
    ladder.add_arguments(parser)


class Workload:
    """One batch's arrays on the device and the rotating queries."""

    def __init__(self, batch, K, H, item, miss_rate, block_size, version=None):
        misses = max(1, int(round(K * miss_rate)))
        hits = K - misses
        windows = math.ceil((H - hits) / misses) + 1
        seq_len = H + windows * misses + 1          # the newest position is never selected
        self.batch, self.K, self.H, self.item = batch, K, H, item
        self.misses, self.windows, self.block_size = misses, windows, block_size
        self.version = version                      # the kernel ladder's rung (None: the tuned one)
        R = batch
        tags = np.full((R, H + 1), -1, np.int32)
        tags[:, :H] = np.arange(H)
        locs = (np.arange(R)[:, None] * (H + 1) + np.arange(H + 1)[None, :]).astype(np.int32)
        host_locs = (np.arange(R)[:, None] * seq_len + np.arange(seq_len)[None, :]).astype(np.int64)
        host_locs[:, seq_len - 1] = -1
        self.host_cache = device.host_cache_array((R * seq_len * item,), np.uint8)
        xp = device.xp
        self.arrays = dict(
            device_buffer_tokens=xp.asarray(tags), host_cache_locs=xp.asarray(host_locs),
            device_buffer_locs=xp.asarray(locs), device_buffer=xp.zeros(R * (H + 1) * item, xp.uint8),
            top_k_device_locs=xp.zeros((batch, K), xp.int32),
            req_pool_indices=xp.arange(batch, dtype=xp.int64),
            seq_lens=xp.full(batch, seq_len, xp.int64),
            lru_slots=xp.asarray(np.tile(np.arange(H, dtype=np.int16), (R, 1))),
            num_real_reqs=xp.asarray(np.array([batch], np.int32)))
        self.queries = []
        for w in range(windows):
            q = np.concatenate([np.arange(hits), H + w * misses + np.arange(misses)]).astype(np.int32)
            self.queries.append(xp.asarray(np.tile(q, (batch, 1))))
        self.calls = [si.check_swap_in(**self.kwargs(q))
                      for q in self.queries]
        self.prepared = [si.kernel_args(call) for call in self.calls]
        self.step = 0

    def kwargs(self, query, **extra):
        return dict(top_k_tokens=query, host_cache=self.host_cache, item_size_bytes=self.item,
                    num_top_k=self.K, hot_buffer_size=self.H, block_size=self.block_size,
                    **self.arrays, **extra)

    def launch(self):
        """One bare kernel launch (pre-converted arguments, no validation)."""
        i = self.step % self.windows
        self.step += 1
        si.launch_unchecked(self.calls[i], self.prepared[i], version=self.version)

    def plan_only(self):
        """One bare launch with ``skip_io``: the planning phases alone, no bytes moved."""
        i = self.step % self.windows
        self.step += 1
        si.launch_unchecked(self.calls[i]._replace(skip_io=True), self.prepared[i], version=self.version)

    def call(self, **extra):
        """One call of the public launcher (validation included)."""
        q = self.queries[self.step % self.windows]
        self.step += 1
        si.load_cache_to_device_buffer_mla(**self.kwargs(q, **extra), version=self.version)

    def check_misses(self):
        xp = device.xp
        src = xp.zeros((self.batch, self.K), xp.int64)
        dst = xp.zeros((self.batch, self.K), xp.int32)
        count = xp.zeros(self.batch, xp.int32)
        self.call(miss_src=src, miss_dst=dst, miss_count=count)
        got = device.to_host(count)
        if not (got == self.misses).all():
            raise RuntimeError(f"expected {self.misses} misses per request, got {sorted(set(got.tolist()))}")


def run(args) -> int:
    if ladder.requested(args):
        return ladder.run(ladder.SWAP_IN, args)
    harness.require_gpu("swap-in")
    batches = [int(b) for b in str(args.batches).split(",") if b]
    floor = harness.h2d_pinned_gbps()
    print(f"pinned host->device memcpy: {floor:.1f} GB/s (the floor for miss copies)")
    print(f"top_k {args.top_k}, hot buffer {args.hot_buffer}, item {args.item_size} B, "
          f"miss rate {args.miss_rate}, block {args.block_size}")
    rows = []
    for batch in batches:
        w = Workload(batch, args.top_k, args.hot_buffer, args.item_size, args.miss_rate, args.block_size)
        w.call()                                   # compile + validate the shape once
        ms = harness.gpu_time_ms(w.launch, iters=args.iters, warmup=3)
        plan_ms = harness.gpu_time_ms(w.plan_only, iters=args.iters, warmup=3)
        launch_us = harness.call_latency_us(w.launch, iters=10)
        call_us = harness.call_latency_us(w.call, iters=10)
        w.check_misses()
        miss_bytes = batch * w.misses * args.item_size
        gbps = miss_bytes / (ms * 1e-3) / 1e9
        rows.append(dict(batch=batch, misses_per_req=w.misses, kernel_us=ms * 1e3,
                         plan_us=plan_ms * 1e3,
                         launch_us=launch_us, call_us=call_us, miss_GBps=gbps,
                         of_floor=gbps / floor))
        del w
    harness.print_table(rows, ["batch", "misses_per_req", "kernel_us", "plan_us", "launch_us", "call_us",
                               "miss_GBps", "of_floor"])
    print("kernel_us: GPU time per call (CUDA events around back-to-back launches queued behind a hold "
          "kernel); plan_us: the same with skip_io (planning only: the time PCIe sits idle); "
          "launch_us / call_us: median wall time of one synchronised bare launch / public call "
          "(validation included)")
    last = rows[-1]
    print(f"largest batch: {last['of_floor']:.0%} of the memcpy floor (target >= 85%)")
    return 0
