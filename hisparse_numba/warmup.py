"""``hisparse-numba warmup``: compile every kernel specialisation once and store it on disk.

A GPU compiles each kernel specialisation the first time a process launches it (the speculative
swap-in takes tens of seconds). :mod:`hisparse_numba.device` keeps compiled kernels in an on-disk
cache (``device.kernel_cache_info()``), so a later process, a lesson or a test, loads them in
milliseconds. Warmup runs each family's ``compile_examples()`` (small valid inputs through every
launcher) and, for ``--tests``, the larger configurations the GPU tests and the sanitizer
workload use, printing a progress bar. Under the simulator nothing is compiled.
"""

from __future__ import annotations

import importlib
import sys
import time

from . import device

LESSON_STEPS = (
    ("gather", "hisparse_numba.compile_check", "compile_gather"),
    ("single-step swap-in and planned copy", "hisparse_numba.hisparse.examples", "compile_examples"),
    ("speculative swap-in", "hisparse_numba.hisparse.spec_examples", "compile_examples"),
    ("kv-canary plan, write, verify", "hisparse_numba.kv_canary.examples", "compile_examples"),
)
TEST_STEPS = (
    ("speculative swap-in, sanitizer workload (source checkout)", "tests.hisparse.spec_workloads",
     "sanitizer_workload"),
    ("benchmark harness kernels", "hisparse_numba.warmup", "compile_harness"),
)


def compile_harness() -> None:
    """The hold and zero-copy gather kernels of ``bench`` and the harness tests."""
    import numpy as np

    from .bench import harness

    host = device.host_cache_array((8, 32), np.uint8)
    buf = device.to_device(np.zeros((8, 32), np.uint8))
    locs = device.to_device(np.arange(4, dtype=np.int64))
    device.launch(harness.zero_copy_gather_kernel, 1, 64, device.byte_words(host), locs,
                  device.byte_words(buf), locs, 4)
    device.launch(harness.hold_kernel, 1, 1, 0)
    device.synchronize()


def steps_for(which: str) -> tuple:
    return {"lessons": LESSON_STEPS, "tests": LESSON_STEPS + TEST_STEPS,
            "all": LESSON_STEPS + TEST_STEPS}[which]


def progress_bar(done: int, total: int, label: str, width: int = 24) -> str:
    filled = width * done // max(total, 1)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"


def warmup(which: str = "lessons", out=sys.stdout) -> int:
    """Fill the kernel cache for ``which`` (lessons, tests, all); returns the number of steps."""
    if device.backend() != "cuda":
        print(f"nothing to compile: backend is {device.backend()!r} (the simulator runs kernels as "
              "Python; only a GPU compiles them)", file=out)
        return 0
    info = device.kernel_cache_info()
    print(f"kernel cache: {info['location']} ({info['entries']} entries, "
          f"{info['bytes'] / 1e6:.1f} MB){'' if info['enabled'] else ' DISABLED'}", file=out)
    steps = steps_for(which)
    tty = getattr(out, "isatty", lambda: False)()
    t_all = time.perf_counter()
    for i, (label, module, name) in enumerate(steps):
        print(progress_bar(i, len(steps), label + " ..."), end="\r" if tty else "\n", file=out,
              flush=True)
        t0 = time.perf_counter()
        getattr(importlib.import_module(module), name)()
        device.synchronize()
        print(progress_bar(i + 1, len(steps), f"{label}: {time.perf_counter() - t0:.1f} s"),
              file=out, flush=True)
    info = device.kernel_cache_info()
    print(f"warm: {info['entries']} cached specialisations, {info['bytes'] / 1e6:.1f} MB, in "
          f"{time.perf_counter() - t_all:.1f} s", file=out)
    return len(steps)


def add_arguments(parser) -> None:
    group = parser.add_mutually_exclusive_group()
    for which in ("lessons", "tests", "all"):
        group.add_argument(f"--{which}", dest="which", action="store_const", const=which,
                           help=f"the kernels {which if which != 'all' else 'everything'} use"
                           + (" (default)" if which == "lessons" else ""))
    parser.set_defaults(which="lessons")


def run(args) -> int:
    warmup(args.which)
    return 0


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="python -m hisparse_numba.warmup")
    add_arguments(p)
    sys.exit(run(p.parse_args()))
