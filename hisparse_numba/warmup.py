"""``hisparse-numba warmup``: compile every kernel specialisation once, in parallel, and store it on disk.

A GPU compiles each kernel specialisation the first time a process launches it (the speculative
swap-in takes tens of seconds per configuration). :mod:`hisparse_numba.device` keeps compiled
kernels in an on-disk cache (``device.kernel_cache_info()``), so a later process, a lesson or a
test, loads them in milliseconds.

Warmup is a list of *tasks*, each as small as one kernel configuration where a family has several
(the speculative swap-in per (batch, steps, top_k, hot, record) the lessons use). ``--jobs N``
worker processes run them at once, each compiling into the shared cache directory; then the parent
runs every task once more, one after the other: a task whose kernels are cached only loads them,
and one whose cache entry another process overwrote (Numba's per-function index is rewritten
whole by whichever process adds a specialisation last) compiles again, so the cache ends complete.
Under the simulator nothing is compiled.

:func:`recording_launches` records which specialisations a piece of code launches, as
:func:`specialisation` names them (kernel, compile-time values, argument types); the coverage test
(``tests/test_warmup_coverage.py``) uses it to prove that ``--lessons`` covers every kernel the
lessons launch.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import time
import types
from dataclasses import dataclass, field

from . import device


@dataclass(frozen=True)
class Task:
    """One unit of warmup: ``module.function(**kwargs)``, labelled for the progress bar."""

    label: str
    module: str
    function: str
    kwargs: dict = field(default_factory=dict, hash=False, compare=False)

    def run(self) -> float:
        t0 = time.perf_counter()
        getattr(importlib.import_module(self.module), self.function)(**self.kwargs)
        device.synchronize()
        return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------- tasks


def single_step(index_dtype: str, record_plan: bool) -> None:
    """The single-step swap-in (both ``skip_io`` values) for one index dtype and plan mode, and
    the planned copy that replays a recorded plan."""
    import numpy as np

    from .hisparse.examples import make_swap_in_problem, planned_copy_args, to_device_problem
    from .hisparse.planned_copy import copy_cache_planned_mla
    from .hisparse.swap_in import (load_cache_to_device_buffer_mla,
                                   load_cache_to_device_buffer_mla_reference)

    rng = np.random.default_rng(0)
    for skip_io in (False, True):
        p = make_swap_in_problem(rng, batch=3, num_top_k=8, hot_buffer_size=16,
                                 record_plan=record_plan, index_dtype=np.dtype(index_dtype).type,
                                 num_real=2)
        p["skip_io"] = skip_io
        load_cache_to_device_buffer_mla(**to_device_problem(p))
        if record_plan and not skip_io:
            load_cache_to_device_buffer_mla_reference(**p)
            d = to_device_problem(p)
            layer = device.to_device(p["device_buffer"])
            for replay_skip in (False, True):
                copy_cache_planned_mla(**planned_copy_args(d, layer, skip_io=replay_skip))


def speculative(batch: int, steps: int, top_k: int, hot: int, record: bool, tail: int = 4,
                item_words: int = 2) -> None:
    """One speculative swap-in configuration: a valid call with misses, hits and repeats."""
    import numpy as np

    from .hisparse.spec_examples import make_spec_problem, set_selection
    from .hisparse.speculative import load_cache_to_device_buffer_spec_mla

    t = steps * top_k
    max_positions = 4 * (hot + t)
    kw = make_spec_problem(batch=batch, steps=steps, top_k=top_k, hot=hot, tail=tail,
                           item_words=item_words, record=record, max_positions=max_positions)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, max_positions - 1, (batch, steps, top_k))
    set_selection(kw, tokens, np.full(batch * steps, max_positions))
    load_cache_to_device_buffer_spec_mla(**kw)


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


# The speculative configurations the lessons launch, (batch, steps, top_k, hot, record): the
# compile examples' two, and those of lessons 01, 03, 04, 08 and 13 (tests/test_warmup_coverage.py
# fails, naming the configuration, when a lesson launches one that is missing here).
LESSON_SPECULATIVE = (
    (2, 2, 16, 16, False),
    (2, 2, 16, 16, True),
)

LESSON_TASKS = (
    Task("gather", "hisparse_numba.compile_check", "compile_gather"),
    *(Task(f"single-step swap-in, {dt} indices{', recording the plan' if rec else ''}",
           "hisparse_numba.warmup", "single_step", {"index_dtype": dt, "record_plan": rec})
      for dt in ("int32", "int64") for rec in (True, False)),
    *(Task(f"speculative swap-in batch={b} steps={s} top_k={k} hot={h}{' record' if r else ''}",
           "hisparse_numba.warmup", "speculative",
           {"batch": b, "steps": s, "top_k": k, "hot": h, "record": r})
      for b, s, k, h, r in LESSON_SPECULATIVE),
    Task("kv-canary plan, write, verify", "hisparse_numba.kv_canary.examples", "compile_examples"),
)
TEST_TASKS = (
    Task("speculative swap-in, sanitizer workload (source checkout)", "tests.hisparse.spec_workloads",
         "sanitizer_workload"),
    Task("benchmark harness kernels", "hisparse_numba.warmup", "compile_harness"),
)


def tasks_for(which: str) -> tuple:
    return {"lessons": LESSON_TASKS, "tests": LESSON_TASKS + TEST_TASKS,
            "all": LESSON_TASKS + TEST_TASKS}[which]


# ----------------------------------------------------------------------------------- running


def progress_bar(done: int, total: int, label: str, width: int = 24) -> str:
    filled = width * done // max(total, 1)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"


def default_jobs(num_tasks: int) -> int:
    return max(1, min(os.cpu_count() or 1, num_tasks))


def _run_in_worker(task: Task) -> float:
    return task.run()


def _cache_line(info: dict) -> str:
    return (f"{info['location']} ({info['entries']} entries, {info['bytes'] / 1e6:.1f} MB)"
            + ("" if info["enabled"] else " DISABLED"))


def warmup(which: str = "lessons", jobs: int | None = None, out=sys.stdout) -> int:
    """Fill the kernel cache for ``which`` (lessons, tests, all) with ``jobs`` worker processes
    (default: one per CPU core, at most one per task); returns the number of tasks run, 0 under
    the simulator. A task that fails is reported and the others go on; :class:`RuntimeError`
    at the end names the failed tasks."""
    if device.backend() != "cuda":
        print(f"nothing to compile: backend is {device.backend()!r} (the simulator runs kernels as "
              "Python; only a GPU compiles them)", file=out)
        return 0
    tasks = tasks_for(which)
    jobs = default_jobs(len(tasks)) if jobs is None else max(1, int(jobs))
    print(f"kernel cache: {_cache_line(device.kernel_cache_info())}", file=out)
    print(f"warmup --{which}: {len(tasks)} tasks, {jobs} process{'es' if jobs > 1 else ''}",
          file=out, flush=True)
    t_all = time.perf_counter()
    failed = []

    def finished(i, task, seconds, error=None):
        status = f"FAILED: {error}" if error else f"{seconds:.1f} s"
        print(progress_bar(i, len(tasks), f"{task.label}: {status} "
                           f"(elapsed {time.perf_counter() - t_all:.0f} s)"), file=out, flush=True)

    if jobs > 1:
        import concurrent.futures as cf
        import multiprocessing

        # spawn, not fork: a forked child of a process that holds a CUDA context cannot use CUDA
        with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(_run_in_worker, task): task for task in tasks}
            for i, future in enumerate(cf.as_completed(futures), 1):
                task = futures[future]
                try:
                    finished(i, task, future.result())
                except Exception as exc:
                    failed.append(task.label)
                    finished(i, task, 0.0, f"{type(exc).__name__}: {exc}")
        t_serial = time.perf_counter()
        for task in tasks:  # loads what is cached, compiles what a lost index entry dropped
            if task.label not in failed:
                task.run()
        print(f"checked every task in this process: {time.perf_counter() - t_serial:.1f} s",
              file=out, flush=True)
    else:
        for i, task in enumerate(tasks, 1):
            try:
                finished(i, task, task.run())
            except Exception as exc:
                failed.append(task.label)
                finished(i, task, 0.0, f"{type(exc).__name__}: {exc}")
    info = device.kernel_cache_info()
    print(f"warm: {info['entries']} cached specialisations, {info['bytes'] / 1e6:.1f} MB, in "
          f"{time.perf_counter() - t_all:.1f} s", file=out, flush=True)
    if failed:
        raise RuntimeError(f"warmup failed for: {'; '.join(failed)}")
    return len(tasks)


# ------------------------------------------------------------------- what a launch compiles


def _value_name(value, depth: int = 0) -> str:
    """A compile-time value of a kernel (a closure cell) the same way in every process."""
    func = getattr(value, "py_func", value)
    if isinstance(func, types.FunctionType):
        name = f"{func.__module__}.{func.__qualname__}"
        cells = func.__closure__ or ()
        if cells and depth < 8:
            name += "(" + ", ".join(_value_name(c.cell_contents, depth + 1) for c in cells) + ")"
        return name
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        import hashlib

        import numpy as np

        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:12]
        return f"array({value.dtype}, {tuple(value.shape)}, {digest})"
    if isinstance(value, (bool, int, float, str, type(None))):
        return repr(value)
    return re.sub(r" at 0x[0-9a-f]+", "", f"{type(value).__qualname__}:{value!r}")


def _arg_type(a) -> str:
    """What decides ``a``'s Numba argument type (dtype, dimensions, layout; a scalar's type)."""
    if isinstance(a, bool):
        return "bool"
    if isinstance(a, int):
        return "int64"
    if isinstance(a, float):
        return "float64"
    dtype = getattr(a, "dtype", None)
    if dtype is None:
        return type(a).__qualname__
    ndim = getattr(a, "ndim", 0)
    if ndim == 0:
        return str(dtype)
    flags = getattr(a, "flags", None)
    if flags is None:
        layout = "C"  # DeviceWords: contiguous words
    else:
        layout = "C" if flags["C_CONTIGUOUS"] else "F" if flags["F_CONTIGUOUS"] else "A"
    return f"{dtype}[{ndim}d,{layout}]"


def specialisation(kernel, args) -> str:
    """The compiled specialisation a launch of ``kernel`` with ``args`` uses, as a string: the
    kernel's module and name, its compile-time values (the factory arguments it closes over, and
    the device functions it calls), and its argument types."""
    return f"{_value_name(kernel)} <- ({', '.join(_arg_type(a) for a in args)})"


def _modules(value, depth: int = 0) -> set:
    """The modules of the kernel or device function ``value`` and of every function it closes over."""
    func = getattr(value, "py_func", value)
    if not isinstance(func, types.FunctionType) or depth >= 8:
        return set()
    found = {func.__module__}
    for cell in func.__closure__ or ():
        found |= _modules(cell.cell_contents, depth + 1)
    return found


LEARNER_MARK = "(not hisparse-numba) "


def is_package_kernel(kernel) -> bool:
    """True when the kernel and every function it closes over come from hisparse-numba (not a
    learner's kernel or device function written in a notebook, which no warmup can know)."""
    return all(m.split(".")[0] == "hisparse_numba" for m in _modules(kernel))


# Functions that turn a call's runtime sizes into a kernel's compile-time values differently on a
# GPU (from the SM count) and in the simulator. The recorder notes their arguments too, so that a
# simulator run proves that warmup meets the same sizes, hence the same GPU configurations.
GEOMETRY_FUNCTIONS = (("hisparse_numba.hisparse.speculative.launch", "geometry"),)


@contextlib.contextmanager
def recording_launches(sink: set | None = None, log_path: str | None = None):
    """Within the block, every :func:`device.launch` adds its :func:`specialisation` to ``sink``
    (a new set unless given; yielded), prefixed with ``LEARNER_MARK`` when the kernel is not all
    hisparse-numba's, and every call of a :data:`GEOMETRY_FUNCTIONS` function adds
    ``module.function(args)``. With ``log_path``, each new entry is also appended to that file as
    a line (so a process that is killed keeps what it recorded)."""
    seen = set() if sink is None else sink

    def note(key):
        if key not in seen:
            seen.add(key)
            if log_path:
                with open(log_path, "a") as f:
                    f.write(key + "\n")

    original = device.launch

    def launch(kernel, grid, block, *args):
        key = specialisation(kernel, args)
        note(key if is_package_kernel(kernel) else LEARNER_MARK + key)
        return original(kernel, grid, block, *args)

    def noting(module, name, fn):
        def geometry(*args):
            note(f"{module}.{name}({', '.join(repr(int(a)) for a in args)})")
            return fn(*args)
        return geometry

    wrapped = []
    for module, name in GEOMETRY_FUNCTIONS:
        mod = importlib.import_module(module)
        wrapped.append((mod, name, getattr(mod, name)))
        setattr(mod, name, noting(module, name, getattr(mod, name)))
    device.launch = launch
    try:
        yield seen
    finally:
        device.launch = original
        for mod, name, fn in wrapped:
            setattr(mod, name, fn)


def add_arguments(parser) -> None:
    group = parser.add_mutually_exclusive_group()
    for which in ("lessons", "tests", "all"):
        group.add_argument(f"--{which}", dest="which", action="store_const", const=which,
                           help=f"the kernels {which if which != 'all' else 'everything'} use"
                           + (" (default)" if which == "lessons" else ""))
    parser.set_defaults(which="lessons")
    parser.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                        help="worker processes that compile at once (default: one per CPU core, "
                        "at most one per task; 1: compile in this process)")


def run(args) -> int:
    try:
        warmup(args.which, args.jobs)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="python -m hisparse_numba.warmup")
    add_arguments(p)
    sys.exit(run(p.parse_args()))
