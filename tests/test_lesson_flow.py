"""The lessons flow (``lessons/flow.py``): warmup tasks compile in the background and each lesson
waits only for the tasks naming it; the lesson -> task mapping of ``warmup.LESSON_TASKS``."""

import concurrent.futures as cf
import threading
import time
from dataclasses import dataclass

import pytest

from hisparse_numba import device, warmup
from hisparse_numba.lessons import flow, runner
from tests.test_warmup_coverage import LESSONS_DIR


@dataclass(frozen=True)
class FakeLesson:
    id: str


def fake_task(name, lessons, seconds=1.0):
    return warmup.Task(name, "fake", "fake", seconds=seconds, lessons=tuple(lessons))


def run_schedule(lessons, tasks, durations, jobs=1, lesson_s=0.05, first_now=False):
    """Schedule with tasks that sleep ``durations[name]`` in threads; returns (when each task
    ended, when each lesson started, results)."""
    ended, started, t0 = {}, {}, time.perf_counter()
    workers = cf.ThreadPoolExecutor(len(tasks) or 1)

    def start_task(task):
        def work():
            time.sleep(durations[task.label])
            ended[task.label] = time.perf_counter() - t0
        return workers.submit(work)

    def run_lesson(lesson):
        started[lesson.id] = time.perf_counter() - t0
        time.sleep(lesson_s)
        return lesson.id

    results = flow.schedule(lessons, tasks, start_task, run_lesson, jobs, first_now=first_now)
    workers.shutdown()
    return ended, started, results


def test_each_lesson_waits_only_for_its_own_tasks():
    lessons = [FakeLesson("00"), FakeLesson("01"), FakeLesson("02")]
    tasks = [fake_task("slow", ["01"], seconds=9), fake_task("quick", ["00"]), fake_task("quick2", ["02"])]
    ended, started, results = run_schedule(lessons, tasks, {"slow": 1.0, "quick": 0.05, "quick2": 0.05})
    assert results == ["00", "01", "02"]                 # in lesson order, whatever the run order
    assert started["00"] >= ended["quick"] and started["00"] < ended["slow"]
    assert started["02"] < ended["slow"]                # lesson 02 does not wait for lesson 01's task
    assert started["01"] >= ended["slow"]


def test_the_first_lesson_can_start_at_once_and_compile_its_own():
    lessons = [FakeLesson("00"), FakeLesson("01")]
    tasks = [fake_task("first", ["00"]), fake_task("second", ["01"])]
    ended, started, _ = run_schedule(lessons, tasks, {"first": 0.5, "second": 0.5}, first_now=True)
    assert started["00"] < ended["first"] and started["01"] >= ended["second"]


def test_jobs_run_lessons_at_once():
    lessons = [FakeLesson(f"{i:02d}") for i in range(4)]
    _, started, _ = run_schedule(lessons, [], {}, jobs=4, lesson_s=0.5)
    assert max(started.values()) < 0.4                   # all four started before any ended


def test_a_failed_task_does_not_hold_its_lesson_back():
    workers = cf.ThreadPoolExecutor(1)

    def start_task(task):
        return workers.submit(lambda: 1 / 0)

    results = flow.schedule([FakeLesson("03")], [fake_task("broken", ["03"])], start_task,
                            lambda lesson: lesson.id)
    workers.shutdown()
    assert results == ["03"]


def test_the_first_lesson_compiles_first_then_the_longest():
    tasks = [fake_task("short", ["05"], 3), fake_task("long", ["01"], 45), fake_task("first", ["00"], 3),
             fake_task("middle", ["04"], 20)]
    assert [t.label for t in flow.task_order(tasks, "00")] == ["first", "long", "middle", "short"]


def test_every_lesson_task_names_lessons_that_exist():
    ids = {lesson.id for lesson in runner.discover(LESSONS_DIR)}
    for task in warmup.LESSON_TASKS:
        assert task.lessons and set(task.lessons) <= ids, task.label
        assert all(f"{i}" in task.label for i in task.lessons), task.label


def test_tasks_of_lesson_are_those_naming_it():
    tasks = warmup.tasks_for("lessons")
    assert {t.label for t in warmup.tasks_of_lesson("3", tasks)} == {
        t.label for t in tasks if "03" in t.lessons}
    assert any(t.function == "speculative" for t in warmup.tasks_of_lesson("03", tasks))
    assert not any(t.function == "speculative" for t in warmup.tasks_of_lesson("00", tasks))


def test_lesson_tasks_run_the_lessons_rung(monkeypatch):
    from hisparse_numba.version_default import LESSON_VERSION, VERSION_ENV
    from hisparse_numba.hisparse.speculative import versions

    monkeypatch.delenv(VERSION_ENV, raising=False)
    seen = []
    monkeypatch.setattr(warmup, "lesson_kernels", lambda: seen.append(versions.check_version(None)),
                        raising=True)
    task = next(t for t in warmup.LESSON_TASKS if t.function == "lesson_kernels")
    task.run()
    assert seen == [LESSON_VERSION] and versions.check_version(None) == versions.DEFAULT
    monkeypatch.setenv(VERSION_ENV, "tuned")             # a learner's choice is kept
    task.run()
    assert seen[-1] == versions.DEFAULT


@pytest.mark.skipif(not device.SIMULATOR, reason="on a GPU the flow compiles its lessons' kernels")
def test_simulator_flow_runs_lessons_without_compiling(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(runner, "run_lesson", lambda lesson, *a, **k: calls.append(lesson.id) or
                        runner.LessonResult(lesson, "simulator", 0.1, True, form="solved"))
    assert flow.run(["00", "02"], LESSONS_DIR, solved=True, jobs=2) == 0
    out = capsys.readouterr().out
    assert sorted(calls) == ["00", "02"] and "compiling" not in out and "2 passed, 0 failed" in out


def test_cli_lessons_run_takes_jobs_and_warmup(monkeypatch):
    from hisparse_numba import cli

    got = {}
    monkeypatch.setattr(flow, "run", lambda *a: got.update(args=a) or 0)
    cli.main(["lessons", "run", "00", "--solved", "--warmup", "--jobs", "3", "--dir", str(LESSONS_DIR)])
    ids, _, _, _, solved, jobs, warm, compile_jobs = got["args"]
    assert (ids, solved, jobs, warm, compile_jobs) == (["00"], True, 3, True, None)
    cli.main(["lessons", "run", "00", "--warmup", "--dir", str(LESSONS_DIR)])
    assert got["args"][5] is None            # the flow picks: 4 on a GPU, 1 in the simulator


def test_gpu_flow_compiles_in_worker_processes_and_marks_the_lessons(monkeypatch, tmp_path, capsys):
    """The flow's GPU path with stand-ins: tasks that run ``os.getpid`` in spawned workers, lessons
    that return at once; each lesson is marked compiled in the (fake) kernel cache afterwards."""
    from hisparse_numba import compile_marks, compile_notice, device

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "kernels"))
    tasks = (warmup.Task("pid for 00", "os", "getpid", lessons=("00",)),
             warmup.Task("pid for 02", "os", "getpid", lessons=("02",)))
    monkeypatch.setattr(device, "backend", lambda: "cuda")
    monkeypatch.setattr(warmup, "tasks_for", lambda which: tasks)
    monkeypatch.setattr(runner, "run_lesson", lambda lesson, *a, **k:
                        runner.LessonResult(lesson, "cuda", 0.1, True, form="solved"))
    assert flow.run(["00", "02"], LESSONS_DIR, solved=True, compile_jobs=2) == 0
    out = capsys.readouterr().out
    assert "4 at a time" in out and "compiling 2 warmup task(s) in 2 background process(es)" in out
    assert "2 passed, 0 failed" in out and "task failed" not in out
    assert compile_marks.mark_path("00").exists() and compile_marks.mark_path("02").exists()
