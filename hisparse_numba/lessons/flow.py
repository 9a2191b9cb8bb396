"""The lessons flow: ``hisparse-numba lessons run --warmup [--jobs N]`` (what ``make lessons`` runs).

On a GPU a lesson's first launch of each kernel specialisation compiles it (tens of seconds for
the speculative swap-in). ``warmup --lessons`` compiles them all into the on-disk kernel cache;
run first and then the lessons, the learner sees nothing until the last compile ends. Here the
warmup's worker processes compile in the background while the lessons run, and each lesson starts
as soon as *its own* tasks (``warmup.tasks_of_lesson``) are compiled; the workers take the first
lesson's tasks first, then the longest (``Task.seconds``) so that no long compile starts last. The
first lesson itself starts at once and compiles what it launches as it goes, so its first kernel
runs after one compile. ``--jobs N`` runs up to N lessons
at a time (each in its own Jupyter kernel: on a GPU machine their time is mostly kernel start and
imports), preferring the lowest lesson id whose tasks are done. Under the simulator nothing is
compiled, and the lessons start at once.

:func:`schedule` is the scheduling alone (tested with fake tasks and lessons); :func:`run` wires
it to ``warmup`` and ``runner``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

POLL_S = 0.5
# Lessons at a time on a GPU: each waits mostly on its kernel's start and imports (seconds) and
# launches small kernels, so a few share one GPU well.
GPU_LESSON_JOBS = 4    # how often a waiting scheduler looks again (a task or lesson ending wakes it sooner)


def task_order(tasks: Sequence, first_lesson: str | None) -> list:
    """The order the compile workers take ``tasks`` in: the first lesson's tasks, then the
    longest first."""
    return sorted(tasks, key=lambda t: (first_lesson not in t.lessons, -t.seconds))


def schedule(lessons: Sequence, tasks: Sequence, start_task: Callable, run_lesson: Callable,
             jobs: int = 1, report: Callable = lambda result: None, first_now: bool = True) -> list:
    """Start every task (``start_task(task) -> Future``, in :func:`task_order`), and run each
    lesson (``run_lesson(lesson) -> result``, up to ``jobs`` at a time) once the tasks naming it
    (``task.lessons``) are done, failed ones included (a lesson then compiles what it lacks).
    With ``first_now`` the first lesson starts at once and compiles what it launches before the
    workers are done (its first kernel then runs after one compile, not after all of its tasks').
    ``report(result)`` is called as each lesson ends; returns the results in lesson order."""
    ids = [lesson.id for lesson in lessons]
    futures = {task: start_task(task) for task in task_order(tasks, ids[0] if ids else None)}
    needs = {lesson.id: [futures[t] for t in tasks if lesson.id in t.lessons] for lesson in lessons}
    if first_now and ids:
        needs[ids[0]] = []
    waiting, running, results = list(lessons), {}, {}
    with cf.ThreadPoolExecutor(max(1, jobs)) as pool:
        while waiting or running:
            for lesson in list(waiting):
                if len(running) >= max(1, jobs):
                    break
                if all(f.done() for f in needs[lesson.id]):
                    waiting.remove(lesson)
                    running[pool.submit(run_lesson, lesson)] = lesson
            pending = [f for f in futures.values() if not f.done()] if waiting else []
            done, _ = cf.wait(list(running) + pending, timeout=POLL_S,
                              return_when=cf.FIRST_COMPLETED)
            for future in done & set(running):
                lesson = running.pop(future)
                results[lesson.id] = future.result()
                report(results[lesson.id])
    return [results[i] for i in ids]


def _compile_pool(jobs: int | None, num_tasks: int):
    """The warmup's worker processes (spawned: a fork of a process with a CUDA context cannot use
    CUDA), each saving into the kernel cache under its lock; None when none can run here."""
    import multiprocessing

    from .. import warmup

    if num_tasks == 0 or not warmup.lock_cache_saves():
        return None
    workers = warmup.default_jobs(num_tasks) if jobs is None else max(1, int(jobs))
    return cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def run(ids=(), lessons_dir=None, out_dir="build/lessons", timeout: int = 600, solved: bool = False,
        jobs: int | None = None, warmup: bool = True, compile_jobs: int | None = None, out=None) -> int:
    """Run the lessons ``ids`` (all: empty) as ``runner.run`` does, ``jobs`` at a time, with the
    warmup's tasks compiling in the background when ``warmup`` (on a GPU; nothing to compile in
    the simulator). ``jobs`` None: :data:`GPU_LESSON_JOBS` on a GPU, 1 in the simulator (whose
    lessons are CPU-bound). Returns 1 when a lesson failed, else 0."""
    from .. import device
    from .. import warmup as warm
    from . import runner

    out = out or sys.stdout
    if jobs is None:
        jobs = GPU_LESSON_JOBS if device.backend() == "cuda" else 1
    lessons = runner.select(runner.discover(lessons_dir), ids)
    if not lessons:
        print(f"no lesson notebooks in {lessons_dir or runner.default_lessons_dir()}", file=out, flush=True)
        return 1
    wanted = {lesson.id for lesson in lessons}
    tasks = [t for t in warm.tasks_for("lessons") if wanted & set(t.lessons)] \
        if warmup and device.backend() == "cuda" else []
    pool = _compile_pool(compile_jobs, len(tasks))
    form = "solved" if solved else "shipped"
    print(f"running {len(lessons)} lesson(s), {form}, {jobs} at a time; "
          + (f"compiling {len(tasks)} warmup task(s) in {pool._max_workers} background process(es); "
             if pool else "") + f"executed copies in {out_dir}", file=out, flush=True)
    t0 = time.perf_counter()
    task_failures = []

    def task_done(task, future):
        if future.cancelled():
            return
        if future.exception() is not None:
            task_failures.append((task.label, f"{type(future.exception()).__name__}: {future.exception()}"))
        else:       # the measured seconds beside the estimate that orders the tasks (Task.seconds)
            print(f"  compiled in {future.result():.1f} s (estimate {task.seconds:.0f} s): {task.label} "
                  f"(at {time.perf_counter() - t0:.0f} s)", file=out, flush=True)

    def start_task(task):
        future = pool.submit(warm._run_in_worker, task)
        future.add_done_callback(lambda f: task_done(task, f))
        return future

    def run_lesson(lesson):
        try:
            return runner.run_lesson(lesson, Path(out_dir), timeout, solved, progress=jobs == 1)
        except (FileNotFoundError, runner.sol.SolutionsFileError) as exc:
            return runner.LessonResult(lesson, "-", 0.0, False, str(exc), form)

    def report(result):
        print(f"{result.line()}  (at {time.perf_counter() - t0:.0f} s)", file=out, flush=True)

    from ..compile_marks import compiling

    try:
        with compiling() if pool is not None else contextlib.nullcontext():
            results = schedule(lessons, tasks, start_task, run_lesson, jobs, report)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    if pool is not None:
        failed_tasks = {label for label, _ in task_failures}
        warm.mark_lessons([t for t in tasks if t.label not in failed_tasks])
    for label, why in task_failures:
        print(f"warmup task failed (its lessons compiled for themselves): {label}: {why}", file=out)
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed, in "
          f"{time.perf_counter() - t0:.0f} s", file=out, flush=True)
    return 1 if failed else 0
