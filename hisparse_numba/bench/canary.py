"""``hisparse-numba bench canary``: plan, write and verify at sglang's sizes (CUDA only).

One decode-like workload: ``--batch`` requests (up to 4096) with ``--prefix`` cached tokens each,
so the plan lists ``batch * prefix`` verify entries (about 1M by default) and a prefill-like write
stamps the same ``batch * prefix`` slots. Throughput counts the bytes each kernel must move:

* plan: per entry, 32 B of plan written + 4 B of ``req_to_token`` read;
* write: per slot, 24 B of inputs read + 32 B canary row written (+ real-KV bytes read);
* verify: per entry, 32 B of plan + 32 B canary row + 24 B predecessor row read (+ real-KV bytes),

and is printed next to the device-to-device copy ceiling measured in the same run. ``kernel_us``
times the kernels alone (``launch_unchecked`` of an accepted call); ``call_us`` the public call with
its default value checks, synchronised; ``call_x`` is their ratio.
"""

from __future__ import annotations

import numpy as np

from .. import device
from ..kv_canary import (
    RealKvHashMode,
    RealKvSource,
    VerifyOrWriteContext,
    launch_canary_plan_kernels,
    launch_canary_verify_kernel,
    launch_canary_write_kernel,
)
from ..kv_canary import plan as plan_mod
from ..kv_canary import verify as verify_mod
from ..kv_canary import write as write_mod
from ..kv_canary.examples import allocate_plans, plan_problem, step_inputs
from . import harness


def add_arguments(parser) -> None:
    parser.add_argument("--batch", type=int, default=4096, help="requests per step (<= 4096)")
    parser.add_argument("--prefix", type=int, default=256, help="cached tokens per request")
    parser.add_argument("--real-kv", choices=["none", "partial", "all"], default="none",
                        help="which requests hash their real KV bytes into the canary (default none)")
    parser.add_argument("--kv-bytes", type=int, default=576, help="real-KV bytes per token (multiple of 16)")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per figure (default 20)")


def run(args) -> int:
    harness.require_gpu("canary")
    bs, prefix = int(args.batch), int(args.prefix)
    max_seq_len = prefix + 1
    entries = bs * prefix
    num_slots = (bs + 1) * max_seq_len
    ceiling = harness.d2d_gbps()
    print(f"device-to-device copy: {ceiling:.0f} GB/s (the ceiling)")
    print(f"batch {bs}, prefix {prefix}: {entries} verify entries / written slots, real-KV {args.real_kv}")

    mode = {"none": RealKvHashMode.NONE, "partial": RealKvHashMode.PARTIAL, "all": RealKvHashMode.ALL}[args.real_kv]
    sources, kv_read = (), 0
    if mode != RealKvHashMode.NONE:
        kv = device.xp.zeros((num_slots, args.kv_bytes), dtype=np.uint8)
        kv[...] = device.xp.random.randint(0, 256, size=kv.shape, dtype=np.uint8)
        sources = (RealKvSource(kv, 1, args.kv_bytes, args.kv_bytes),)
        kv_read = 16 if mode == RealKvHashMode.PARTIAL else args.kv_bytes
    ctx = VerifyOrWriteContext.allocate(num_slots, ring_capacity=1024, real_kv_sources=sources,
                                        real_kv_hash_mode=mode)

    rows = list(range(1, bs + 1))
    prefill = plan_problem(rows, [0] * bs, [prefix] * bs, max_reqs=bs + 1, max_seq_len=max_seq_len)
    decode = plan_problem(rows, [prefix] * bs, [1] * bs, max_reqs=bs + 1, max_seq_len=max_seq_len)
    tokens = np.arange((bs + 1) * max_seq_len, dtype=np.int64).reshape(bs + 1, max_seq_len)
    write_vp, write_wp = allocate_plans(1, bs)
    launch_canary_plan_kernels(verify_plan_out=write_vp, write_plan_out=write_wp, verify_capacity=1,
                               **prefill.inputs(to_device=True))
    write_args = {k: device.to_device(v) for k, v in step_inputs(prefill, tokens).items()}
    vp, wp = allocate_plans(entries, bs)
    plan_args = decode.inputs(to_device=True)

    def plan():
        launch_canary_plan_kernels(verify_plan_out=vp, write_plan_out=wp, verify_capacity=entries, **plan_args)

    def write():
        launch_canary_write_kernel(context=ctx, plan=write_wp, enable_write_input_assert=False,
                                   expected_input_tokens=None, expected_input_positions=None, **write_args)

    def verify():
        launch_canary_verify_kernel(context=ctx, plan=vp, check_verify_expected_token=False)

    plan_call = plan_mod.check_canary_plan(verify_plan_out=vp, write_plan_out=wp, verify_capacity=entries,
                                           checks="shapes", **plan_args)
    write_call = write_mod.check_canary_write(context=ctx, plan=write_wp, enable_write_input_assert=False,
                                              expected_input_tokens=None, expected_input_positions=None,
                                              checks="shapes", **write_args)
    verify_call = verify_mod.check_canary_verify(context=ctx, plan=vp, check_verify_expected_token=False,
                                                 checks="shapes")
    results = []
    for name, fn, kernels, nbytes in (
            ("plan", plan, lambda: plan_mod.launch_unchecked(plan_call), entries * 36),
            ("write", write, lambda: write_mod.launch_unchecked(write_call), entries * (56 + kv_read)),
            ("verify", verify, lambda: verify_mod.launch_unchecked(verify_call), entries * (88 + kv_read))):
        fn()
        device.synchronize()
        ms = harness.gpu_time_ms(kernels, iters=args.iters, warmup=3)
        call_us = harness.call_latency_us(fn, iters=10)
        gbps = nbytes / (ms * 1e-3) / 1e9
        results.append(dict(kernel=name, entries=entries, kernel_us=ms * 1e3, call_us=call_us,
                            call_x=call_us / (ms * 1e3), ns_per_entry=ms * 1e6 / entries, GBps=gbps,
                            of_ceiling=gbps / ceiling))
    state = {k: device.to_host(v) for k, v in ctx.state_arrays().items()}
    if int(device.to_host(vp.enable)[0]) != 1 or int(state["violation_write_index"][0]) != 0:
        raise RuntimeError("the benchmark pipeline reported violations or an overflow: results invalid")
    harness.print_table(results, ["kernel", "entries", "kernel_us", "call_us", "call_x", "ns_per_entry",
                                  "GBps", "of_ceiling"])
    print("kernel_us: CUDA events around back-to-back unchecked launches; call_us: median wall time of "
          "one synchronised public call (checks=\"full\"); call_x = call_us / kernel_us. Bytes counted "
          "as in the module docstring.")
    return 0
