"""Where a kernel's compile time goes, without a GPU: the Numba front end (typing, lowering to
LLVM IR) against NVVM (LLVM IR to PTX), per warmup task and per kernel specialisation.

    HISPARSE_NUMBA_BACKEND=compile-only python scripts/compile_profile.py [--which lessons] [--match TEXT]

Times are this process's CPU seconds (``time.process_time``: Numba compiles on one thread, so on
an idle machine they equal the wall time, and a busy machine does not inflate them). Each task of
``warmup.tasks_for(which)`` runs in this process with an empty list of compiled
signatures (``device.compiled_signatures``), so each reports what it compiles on its own, as a
warmup worker process does. A GPU adds the driver's PTX -> cubin step (ptxas), not measured here.
``HISPARSE_NUMBA_INLINE=numba`` measures the package's ``inline=True`` device functions inlined in
Numba's IR instead of by NVVM (``kernel_cache.INLINE_ENV``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HISPARSE_NUMBA_BACKEND", "compile-only")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--which", default="lessons", choices=("lessons", "tests", "all"))
    p.add_argument("--match", default="", help="only tasks whose label contains this text")
    args = p.parse_args(argv)

    from hisparse_numba import device, warmup
    from numba.cuda.cudadrv import nvvm

    if not device.COMPILE_ONLY:
        raise SystemExit("run with HISPARSE_NUMBA_BACKEND=compile-only")
    nvvm_seconds = [0.0]
    compile_ir = nvvm.compile_ir

    def timed_compile_ir(*a, **k):
        t0 = time.process_time()
        try:
            return compile_ir(*a, **k)
        finally:
            nvvm_seconds[0] += time.process_time() - t0

    nvvm.compile_ir = timed_compile_ir
    per_kernel = []         # (kernel, front end s, NVVM s) of each specialisation compiled
    compile_ptx = device.cuda.compile_ptx

    def timed_compile_ptx(func, sig, **k):
        before, t0 = nvvm_seconds[0], time.process_time()
        result = compile_ptx(func, sig, **k)
        spent_nvvm = nvvm_seconds[0] - before
        per_kernel.append((f"{func.__module__.rsplit('.', 1)[-1]}.{func.__qualname__}",
                           time.process_time() - t0 - spent_nvvm, spent_nvvm))
        return result

    device.cuda.compile_ptx = timed_compile_ptx
    total_front = total_nvvm = 0.0
    print(f"{'task':<90} {'specs':>5} {'front s':>8} {'nvvm s':>7}", flush=True)
    for task in warmup.tasks_for(args.which):
        if args.match not in task.label:
            continue
        device.compiled_signatures.clear()
        nvvm_seconds[0] = 0.0
        per_kernel.clear()
        t0 = time.process_time()
        task.run()
        wall = time.process_time() - t0
        front = wall - nvvm_seconds[0]
        total_front, total_nvvm = total_front + front, total_nvvm + nvvm_seconds[0]
        print(f"{task.label[:90]:<90} {len(per_kernel):>5} {front:>8.1f} {nvvm_seconds[0]:>7.1f}",
              flush=True)
        for name, front_s, nvvm_s in per_kernel:
            print(f"    {name[:86]:<86} {'':>5} {front_s:>8.1f} {nvvm_s:>7.1f}", flush=True)
    print(f"{'total':<90} {'':>5} {total_front:>8.1f} {total_nvvm:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
