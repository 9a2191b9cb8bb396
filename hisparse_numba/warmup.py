"""``hisparse-numba warmup``: compile every kernel specialisation once, in parallel, and store it on disk.

A GPU compiles each kernel specialisation the first time a process launches it (the speculative
swap-in takes tens of seconds per configuration). :mod:`hisparse_numba.device` keeps compiled
kernels in an on-disk cache (``device.kernel_cache_info()``), so a later process, a lesson or a
test, loads them in milliseconds.

Warmup is a list of *tasks*, each as small as one kernel configuration where a family has several
(each speculative swap-in configuration a lesson launches). ``--jobs N`` worker processes run them
at once, each compiling into the shared cache directory, their saves serialised by a file lock
(:func:`lock_cache_saves`: Numba's per-kernel index is not safe for concurrent writers); then the
parent runs every task once more, one after the other: a task whose kernels are cached only loads
them, one whose entry is missing compiles it, so the cache ends complete. Under the simulator
nothing is compiled.

``launch_recorder.recording_launches`` (re-exported here) records which specialisations a piece
of code launches (kernel, compile-time values, argument types); the coverage test
(``tests/test_warmup_coverage.py``) uses it to prove that ``--lessons`` covers every kernel the
lessons launch.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import time
from dataclasses import dataclass, field

from . import device
from .hisparse.single_step.workloads import single_step, strided_copy  # noqa: F401  (tasks name them here)
from .launch_recorder import (GEOMETRY_FUNCTIONS, LEARNER_MARK, is_package_kernel,  # noqa: F401
                              recording_launches, specialisation)


@dataclass(frozen=True)
class Task:
    """One unit of warmup: ``module.function(**kwargs)``, labelled for the progress bar.

    ``lessons`` names the lessons that launch what this task compiles (``tasks_of_lesson``: a
    lesson of the lessons flow waits only for its own tasks); such a task runs with the lessons'
    rung of each kernel ladder (``lesson_version``), as the lessons do."""

    label: str
    module: str
    function: str
    kwargs: dict = field(default_factory=dict, hash=False, compare=False)
    seconds: float = 3.0        # about how long it compiles on a GPU's host (H100): longest start first
    simulator_only: bool = False  # what only a lesson's simulator branch launches (a GPU skips it)
    gpu_only: bool = False        # what only a lesson's GPU branch launches (the simulator skips it)
    lessons: tuple = ()           # the lessons ("00", "03", ...) that launch what it compiles

    def run(self) -> float:
        t0 = time.perf_counter()
        with lesson_version(bool(self.lessons)):
            getattr(importlib.import_module(self.module), self.function)(**self.kwargs)
        device.synchronize()
        return time.perf_counter() - t0


@contextlib.contextmanager
def lesson_version(active: bool = True):
    """Within: ``HISPARSE_NUMBA_VERSION`` is the lessons' rung (``version_default``; a value set
    already, e.g. ``tuned``, is kept), as in a lesson's kernel; afterwards as it was."""
    from .version_default import LESSON_VERSION, VERSION_ENV

    before = os.environ.get(VERSION_ENV)
    if active and not before:
        os.environ[VERSION_ENV] = str(LESSON_VERSION)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(VERSION_ENV, None)
        else:
            os.environ[VERSION_ENV] = before


def tasks_of_lesson(lesson_id: str, tasks=None) -> tuple:
    """The tasks (of ``tasks``; default the lessons' in this world) whose kernels lesson
    ``lesson_id`` launches."""
    tasks = tasks_for("lessons") if tasks is None else tasks
    return tuple(t for t in tasks if str(lesson_id).zfill(2) in t.lessons)


# ---------------------------------------------------------------------------------------- tasks
#
# Each task launches the kernels of one configuration on small valid inputs, with the argument
# types (dtypes, layouts) that the lessons pass: a lesson that hands a kernel a strided view (a plan
# addressed as sglang addresses it, a state reached through a guarded arena) launches another
# specialisation than one with contiguous arrays. Deliberately unchecked lesson launches are
# reproduced here with views that are in bounds.


def planned_copy_int64_destinations() -> None:
    """The planned copy with ``int64`` destinations (sglang's old plan dtype), launched unchecked
    as lesson 05 does in the simulator to show what the dtype check prevents, here in bounds."""
    import numpy as np

    from .hisparse.single_step import planned_copy
    from .hisparse.single_step.examples import make_swap_in_problem, to_device_problem
    from .hisparse.single_step import load_cache_to_device_buffer_mla_reference

    p = make_swap_in_problem(np.random.default_rng(0), batch=3, num_top_k=8, hot_buffer_size=16,
                             block_size=32)
    load_cache_to_device_buffer_mla_reference(**p)
    d = to_device_problem(p)
    planned_copy.launch_unchecked(planned_copy.PlannedCopyCall(
        num_real=3, num_blocks=1, block_size=32, skip_io=False, item_size_bytes=p["item_size_bytes"],
        miss_src=d["miss_src"], miss_dst=d["miss_dst"].astype(np.int64), miss_count=d["miss_count"],
        num_real_reqs=d["num_real_reqs"], host_cache=d["host_cache"],
        device_buffer=device.to_device(p["device_buffer"])))


def speculative(batch: int, steps: int, top_k: int, hot: int, record: bool, *, tail: int = 4,
                item_words: int = 2, state_steps: int | None = None, strided=(),
                version: int | None = None) -> None:
    """One speculative swap-in configuration: a valid call with misses, hits and repeats, on rung
    ``version`` (``speculative.versions``; None: the tuned one).

    ``strided`` names the arrays (``miss_src``, ``miss_dst``, ``scratch_state``) passed as strided
    views; ``state_steps`` builds the state for that many steps and then calls with ``steps``
    (lesson 04's 5-step call on a 4-step state, its metadata rows widened in bounds). Either launches
    without the launcher's checks, as the lessons that do so."""
    import numpy as np

    from .hisparse.speculative.examples import make_spec_problem, set_selection
    from .hisparse.speculative import (check_speculative, launch_unchecked,
                                       load_cache_to_device_buffer_spec_mla)

    built_steps = state_steps or steps
    max_positions = 4 * (hot + max(steps, built_steps) * top_k)
    kw = make_spec_problem(batch=batch, steps=built_steps, top_k=top_k, hot=hot, tail=tail,
                           item_words=item_words, record=record, max_positions=max_positions)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, max_positions - 1, (batch, built_steps, top_k))
    set_selection(kw, tokens, np.full(batch * built_steps, max_positions))
    if not strided and built_steps == steps:
        load_cache_to_device_buffer_spec_mla(**kw, version=version)
        return
    call = check_speculative(**kw)
    xp, state = device.xp, call.state
    changes = {name: strided_copy(getattr(call, name)) for name in strided if name != "scratch_state"}
    if built_steps != steps:
        tokens = rng.integers(0, max_positions - 1, (batch, steps, top_k)).astype(np.int32)
        changes.update(steps=steps, top_k_tokens=xp.asarray(tokens),
                       top_k_device_locs=xp.full((batch, steps, top_k), -1, dtype=xp.int32),
                       seq_lens=xp.full(batch * steps, max_positions, dtype=xp.int32))
    if "scratch_state" in strided:
        width = state.scratch_state.shape[1] * steps // built_steps
        state = state._replace(scratch_state=strided_copy(state.scratch_state, max(width, 1)))
    launch_unchecked(call._replace(state=state, **changes), version)


def lesson_kernels() -> None:
    """The kernels that lesson checker modules define themselves (lesson 07's one-stride writer)."""
    import numpy as np

    from .lessons import ex07

    plan = {"miss_src": np.zeros((2, 4), np.int64), "miss_dst": np.zeros((2, 4), np.int32),
            "miss_count": np.array([2, 1], np.int32)}
    ex07.write_like_sglang(device.xp.zeros(16, np.int64), device.xp.zeros(16, np.int32), 4, plan)


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


def _about(lessons) -> str:
    return ("lesson " if len(lessons) == 1 else "lessons ") + ", ".join(lessons)


def _spec(batch, steps, top_k, hot, record, why, lessons=(), **options):
    extra = "".join(f" {k}={v}" for k, v in options.items())
    why = why or _about(lessons)
    return Task(f"speculative swap-in batch={batch} steps={steps} top_k={top_k} hot={hot}"
                f"{' record' if record else ''}{extra} ({why})", "hisparse_numba.warmup", "speculative",
                {"batch": batch, "steps": steps, "top_k": top_k, "hot": hot, "record": record, **options},
                seconds=45.0 if options.get("version") != 1 and not lessons else SPEC_LESSON_SECONDS,
                lessons=tuple(lessons))


def _single(why, simulator_only=False, gpu_only=False, lessons=(), seconds=3.0, **options):
    label = ", ".join(f"{k}={v}" for k, v in options.items() if k != "rungs") or "the default sizes"
    return Task(f"single-step swap-in {label} ({why or _about(lessons)})", "hisparse_numba.warmup",
                "single_step", options, simulator_only=simulator_only, gpu_only=gpu_only,
                lessons=tuple(lessons), seconds=seconds)


def _lesson(label, module, function, lessons, **fields):
    return Task(f"{label} ({_about(lessons)})", module, function, lessons=tuple(lessons), **fields)


# About how long a lesson's speculative configuration compiles on the lessons' rung (version 1),
# the driver's PTX -> cubin step included: 8.5 CPU seconds to PTX on a 2-core machine (the tuned
# rung's: 13), a third of them the state's initialiser and the value checks that every such task
# compiles.
SPEC_LESSON_SECONDS = 10.0
# What the lessons launch, and which lesson launches it (tests/test_warmup_coverage.py fails,
# naming lesson and kernel, when a lesson launches a specialisation that none of the tasks naming
# it launches). Single-step tasks compile the lessons' rung only (``rungs=(None,)``: the default,
# which ``lesson_version`` makes the lessons'). The speculative swap-in compiles for tens of
# seconds per configuration, so each is a task of its own.
ONE_RUNG = (None,)
LESSON_TASKS = (
    _lesson("gather", "hisparse_numba.compile_check", "compile_gather", ("00", "10", "11")),
    _single("", num_top_k=3, hot_buffer_size=6, batch=1, replay=True, rungs=ONE_RUNG, lessons=("00",)),
    _single("", record_plan=False, rungs=ONE_RUNG, lessons=("04", "06")),
    _single("", replay=True, rungs=ONE_RUNG, lessons=("01", "05", "06", "07", "08", "13")),
    _single("", strided_plan=True, replay=True, rungs=ONE_RUNG, lessons=("07", "13")),
    _single("", num_top_k=6, hot_buffer_size=12, batch=1, rungs=ONE_RUNG, lessons=("09",)),
    _single("lesson 09 in the simulator", num_top_k=6, hot_buffer_size=12, batch=1, unchecked_hot=4,
            simulator_only=True, rungs=ONE_RUNG, lessons=("09",)),
    _lesson("planned copy, int64 destinations, in the simulator", "hisparse_numba.warmup",
            "planned_copy_int64_destinations", ("05",), simulator_only=True),
    _lesson("lesson 07's one-stride plan writer", "hisparse_numba.warmup", "lesson_kernels", ("07",)),
    _spec(2, 4, 16, 32, True, "", lessons=("01",)),
    _spec(2, 4, 16, 32, True, "", lessons=("01",), strided=("miss_src", "miss_dst")),
    _spec(2, 2, 8, 16, True, "", lessons=("03",)),
    _spec(3, 2, 8, 16, True, "", lessons=("03", "08")),
    _spec(2, 2, 8, 16, False, "", lessons=("04",)),
    _spec(1, 5, 8, 16, False, "", lessons=("04",), state_steps=4, strided=("scratch_state",)),
    _lesson("kv-canary plan, write, verify", "hisparse_numba.kv_canary.examples", "compile_examples",
            ("02", "12", "13")),
    _lesson("benchmark harness kernels (lessons 11 and 16 time kernels on a GPU; bench)",
            "hisparse_numba.warmup", "compile_harness", ("11", "16")),
    _lesson("lesson 16's version-1 hit stage", "hisparse_numba.lessons.ex16", "warm_up", ("16",)),
    _single("lesson 16, every rung against the reference", lessons=("16",)),
    # lesson 16 on a GPU times every rung with the ladder benchmark (its sizes, int64 indices)
    *(_single("lesson 16 on a GPU, the ladder", gpu_only=True, num_top_k=2048, hot_buffer_size=4096,
              batch=2, block_size=1024, index_dtype="int64", record_plan=rec, lessons=("16",),
              seconds=30.0) for rec in (True, False)),
)
# The compile examples of every family (the compile-only check and the tests use them), the
# sanitizer workload, the single-step fuzz, and the benchmark harness.
FUZZ_PARTS = 10
TEST_TASKS = (
    *(Task(f"single-step swap-in examples, {dt} indices{', recording the plan' if rec else ''}",
           "hisparse_numba.warmup", "single_step",
           {"index_dtype": dt, "record_plan": rec, "skip_io": (False, True), "replay": True})
      for dt in ("int32", "int64") for rec in (True, False)),
    *(_spec(2, 2, 16, 16, rec, "compile examples") for rec in (False, True)),
    Task("speculative swap-in, sanitizer workload (source checkout)", "hisparse_numba.hisparse.speculative.workloads",
         "sanitizer_workload", seconds=52.0),
    # the single-step fuzz's configurations (about 80 specialisations on a GPU), in parts
    *(Task(f"single-step swap-in, the fuzz's configurations, part {part + 1} of {FUZZ_PARTS} (source "
           "checkout)", "hisparse_numba.hisparse.single_step.workloads", "compile_fuzz_configurations",
           {"part": part, "parts": FUZZ_PARTS}, seconds=25.0) for part in range(FUZZ_PARTS)),
)


def bench_spec_tasks(batches, variants) -> tuple:
    """The configurations ``bench spec`` launches for ``batches`` and ``variants``: one speculative
    task per (occurrences per thread, committer tile, record) key its batches reach on this GPU
    (``speculative.tiling.geometry``), at the first batch with that key and the benchmark's sizes
    (small items: the item size is not compiled in), and the single-step kernels of ``lru_1_full``."""
    from .bench import spec_shape as bench
    from .hisparse.speculative.tiling import geometry

    records = {True} | ({False} if {"spec_4_full", "spec_1_full_3_shared"} & set(variants) else set())
    tasks, seen = [], set()
    for batch in batches:
        _, reps, _, committer = geometry(batch, bench.NUM_STEPS * bench.TOP_K)
        for record in sorted(records, reverse=True):
            if (reps, committer, record) not in seen:
                seen.add((reps, committer, record))
                tasks.append(_spec(batch, bench.NUM_STEPS, bench.TOP_K, bench.HOT, record,
                                   "bench spec", tail=bench.PAGE))
    if "lru_1_full" in variants:
        tasks.append(_single("bench spec", num_top_k=bench.TOP_K, hot_buffer_size=bench.HOT,
                             record_plan=False, batch=1, block_size=1024))
    return tuple(tasks)


def spec_rung_tasks() -> tuple:
    """The compile examples' speculative configurations on every rung but the tuned one (which
    ``TEST_TASKS`` has): the tests and the compile examples run every rung."""
    from .hisparse.speculative.versions import DEFAULT, VERSIONS

    return tuple(_spec(2, 2, 16, 16, rec, f"compile examples, version {v}", version=v)
                 for v in sorted(VERSIONS) if v != DEFAULT for rec in (False, True))


def tasks_for(which: str) -> tuple:
    """The tasks of ``which`` (lessons; tests; all: tests and bench spec) in this world: on a GPU
    without the launches only a lesson's simulator branch makes."""
    tasks = {"lessons": LESSON_TASKS, "tests": LESSON_TASKS + TEST_TASKS,   # tests run the lessons too
             "all": LESSON_TASKS + TEST_TASKS}[which]
    if which != "lessons":
        tasks += spec_rung_tasks()
    if which == "all":
        from .bench import spec_shape

        tasks += bench_spec_tasks(spec_shape.DEFAULT_BATCHES, spec_shape.DEFAULT_VARIANTS)
    on_gpu = device.backend() == "cuda"
    return tuple(t for t in tasks if not (t.simulator_only if on_gpu else t.gpu_only))


# ----------------------------------------------------------------------------------- running


def progress_bar(done: int, total: int, label: str, width: int = 24) -> str:
    filled = width * done // max(total, 1)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"


def default_jobs(num_tasks: int) -> int:
    return max(1, min(os.cpu_count() or 1, num_tasks))


def lock_cache_saves() -> bool:
    """Saves into the kernel cache hold the cache directory's lock (``device.lock_cache_saves``)."""
    return device.lock_cache_saves()


def _run_in_worker(task: Task) -> float:
    lock_cache_saves()
    return task.run()


def _cache_line(info: dict) -> str:
    return (f"{info['location']} ({info['entries']} entries, {info['bytes'] / 1e6:.1f} MB)"
            + ("" if info["enabled"] else " DISABLED"))


def warmup(which: str = "lessons", jobs: int | None = None, out=sys.stdout, tasks=None) -> int:
    """Fill the kernel cache (:func:`fill_cache`) holding the cache's warmup lock, so that a lesson
    started meanwhile says that its kernels are being compiled (``compile_notice``)."""
    from .compile_marks import compiling

    if device.backend() != "cuda":
        return fill_cache(which, jobs, out, tasks)
    with compiling():
        return fill_cache(which, jobs, out, tasks)


def fill_cache(which: str = "lessons", jobs: int | None = None, out=sys.stdout, tasks=None) -> int:
    """Fill the kernel cache for ``which`` (lessons, tests, all; or the given ``tasks``, which
    names for the progress line) with
    ``jobs`` worker processes (default: one per CPU core, at most one per task); returns the number
    of tasks run, 0 under the simulator. A task that fails is reported and the others go on;
    :class:`RuntimeError` at the end names the failed tasks."""
    if device.backend() != "cuda":
        print(f"nothing to compile: backend is {device.backend()!r} (the simulator runs kernels as "
              "Python; only a GPU compiles them)", file=out)
        return 0
    given = tasks is not None
    tasks = tuple(tasks) if given else tasks_for(which)
    jobs = default_jobs(len(tasks)) if jobs is None else max(1, int(jobs))
    print(f"kernel cache: {_cache_line(device.kernel_cache_info())}", file=out)
    print(f"warmup {which if given else '--' + which}: {len(tasks)} task{'s' if len(tasks) > 1 else ''}, {jobs} "
          f"process{'es' if jobs > 1 else ''}",
          file=out, flush=True)
    t_all = time.perf_counter()
    failed = []

    def finished(i, task, seconds_of):
        """Report task ``i``: ``seconds_of()`` returns its time or raises its failure."""
        try:
            status = f"{seconds_of():.1f} s"
        except Exception as exc:
            failed.append(task.label)
            status = f"FAILED: {type(exc).__name__}: {exc}"
        print(progress_bar(i, len(tasks), f"{task.label}: {status} "
                           f"(elapsed {time.perf_counter() - t_all:.0f} s)"), file=out, flush=True)

    if jobs > 1 and not lock_cache_saves():
        print("(no file locks here: compiling in this process only)", file=out)
        jobs = 1
    if jobs > 1:
        import concurrent.futures as cf
        import multiprocessing

        # spawn, not fork: a forked child of a process that holds a CUDA context cannot use CUDA
        with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            by_cost = sorted(tasks, key=lambda task: -task.seconds)   # no long task starts last
            futures = {pool.submit(_run_in_worker, task): task for task in by_cost}
            for i, future in enumerate(cf.as_completed(futures), 1):
                finished(i, futures[future], future.result)
        t_serial = time.perf_counter()
        for task in tasks:  # loads what is cached, compiles what a lost index entry dropped
            if task.label not in failed:
                task.run()
        print(f"checked every task in this process: {time.perf_counter() - t_serial:.1f} s",
              file=out, flush=True)
    else:
        for i, task in enumerate(tasks, 1):
            finished(i, task, task.run)
    mark_lessons([t for t in tasks if t.label not in failed])
    info = device.kernel_cache_info()
    print(f"warm: {info['entries']} cached specialisations, {info['bytes'] / 1e6:.1f} MB, in "
          f"{time.perf_counter() - t_all:.1f} s", file=out, flush=True)
    if failed:
        raise RuntimeError(f"warmup failed for: {'; '.join(failed)}")
    return len(tasks)


def mark_lessons(done) -> list:
    """Mark in the kernel cache (``compile_notice``) every lesson all of whose tasks in this world
    are among the tasks ``done``; the ids marked."""
    from .compile_marks import mark_compiled

    done = {t.label for t in done}
    every = tasks_for("lessons")
    ids = sorted(i for i in {i for t in every for i in t.lessons}
                 if all(t.label in done for t in every if i in t.lessons))
    mark_compiled(ids)
    return ids


def add_arguments(parser) -> None:
    group = parser.add_mutually_exclusive_group()
    helps = {"lessons": "the kernels the lessons launch (default)",
             "tests": "those and the kernels the tests, the sanitizer workload and bench launch",
             "all": "those and what bench spec launches (its speculative configurations)"}
    for which, text in helps.items():
        group.add_argument(f"--{which}", dest="which", action="store_const", const=which, help=text)
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
