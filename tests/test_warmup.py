"""``hisparse-numba warmup``: its tasks exist, its progress bar, its options, the recorder that names
specialisations, the simulator's answer, and (on a GPU) a parallel warmup that fills the cache."""

import argparse
import io

import numpy as np
import pytest

from hisparse_numba import device, warmup


@pytest.mark.parametrize("which", ["lessons", "tests", "all"])
def test_every_task_names_a_real_function(which):
    import importlib

    tasks = warmup.tasks_for(which)
    assert tasks and set(warmup.tasks_for("lessons")) <= set(tasks)
    assert len({t.label for t in tasks}) == len(tasks), "labels name tasks in the progress bar"
    for task in tasks:
        assert callable(getattr(importlib.import_module(task.module), task.function))


def test_the_speculative_swap_in_is_one_task_per_configuration():
    spec = [t for t in warmup.tasks_for("all") if t.function == "speculative"]
    assert len(spec) >= 4
    assert len({tuple(sorted(t.kwargs.items())) for t in spec}) == len(spec)


def test_progress_bar():
    assert warmup.progress_bar(0, 4, "x", width=8) == "[........] 0/4 x"
    assert warmup.progress_bar(2, 4, "x", width=8) == "[####....] 2/4 x"
    assert warmup.progress_bar(4, 4, "x", width=8) == "[########] 4/4 x"


def test_jobs_option_and_default():
    p = argparse.ArgumentParser()
    warmup.add_arguments(p)
    assert (p.parse_args([]).which, p.parse_args([]).jobs) == ("lessons", None)
    assert (p.parse_args(["--all", "--jobs", "3"]).which, p.parse_args(["-j", "3"]).jobs) == ("all", 3)
    assert 1 <= warmup.default_jobs(5) <= 5 and warmup.default_jobs(1) == 1


@pytest.mark.skipif(device.backend() == "cuda", reason="the simulator's answer")
def test_simulator_has_nothing_to_compile():
    out = io.StringIO()
    assert warmup.warmup("all", jobs=4, out=out) == 0
    assert "nothing to compile" in out.getvalue()


def test_recorder_names_kernel_compile_time_values_and_argument_types(tmp_path):
    from hisparse_numba.hisparse.gather import gather_kernel

    log = tmp_path / "launches.txt"
    host = device.host_cache_array((8, 32), np.uint8)
    with warmup.recording_launches(log_path=str(log)) as seen:
        for dtype in (np.int64, np.int64, np.int32):
            locs = device.to_device(np.arange(2, dtype=dtype))
            device.launch(gather_kernel, 1, 32, device.byte_words(host),
                          device.byte_words(device.xp.zeros((8, 32), np.uint8)), locs, locs, 4)
    device.synchronize()
    assert device.launch.__name__ == "launch" and device.launch.__module__ == "hisparse_numba.device"
    assert sorted(seen) == [f"hisparse_numba.hisparse.gather.gather_kernel <- (uint64[1d,C], uint64[1d,C], "
                            f"{t}[1d,C], {t}[1d,C], int64)" for t in ("int32", "int64")]
    assert sorted(log.read_text().splitlines()) == sorted(seen)


def test_recorder_notes_the_speculative_geometry():
    from hisparse_numba.hisparse.speculative import tiling

    with warmup.recording_launches() as seen:
        tiling.geometry(3, 16)
    assert seen == {"hisparse_numba.hisparse.speculative.tiling.geometry(3, 16)"}
    assert tiling.geometry.__name__ == "geometry" and tiling.geometry.__module__ == tiling.__name__


def test_recorder_keys_factory_kernels_by_their_compile_time_values():
    from hisparse_numba.hisparse.single_step.planned_copy import planned_copy_kernel

    names = {warmup.specialisation(planned_copy_kernel(flag), (np.zeros(3, np.int32), 1))
             for flag in (False, True, False)}
    assert names == {f"hisparse_numba.hisparse.single_step.planned_copy.planned_copy_kernel.<locals>.kernel({flag}) "
                     "<- (int32[1d,C], int64)" for flag in (False, True)}


def test_recorder_marks_kernels_the_learner_writes():
    from hisparse_numba.device import cuda

    def learner_kernel(a):
        a[0] = 1

    kernel = cuda.jit(learner_kernel)
    assert not warmup.is_package_kernel(kernel)
    with warmup.recording_launches() as seen:
        device.launch(kernel, 1, 1, device.to_device(np.zeros(1, np.int64)))
    device.synchronize()
    assert seen == {warmup.LEARNER_MARK + warmup.specialisation(kernel, (np.zeros(1, np.int64),))}


@pytest.mark.gpu
def test_parallel_warmup_fills_the_cache():
    out = io.StringIO()
    n = len(warmup.tasks_for("lessons"))
    assert warmup.warmup("lessons", jobs=2, out=out) == n
    assert device.kernel_cache_info()["entries"] > 0
    text = out.getvalue()
    assert f"{n}/{n}" in text
    assert "checked every task in this process" in text and "FAILED" not in text


def test_parallel_machinery_reports_each_task_and_failures(monkeypatch):
    """The worker pool, the progress lines and the serial re-check, run on the simulator's kernels
    (the parent is told it is on a GPU; the spawned workers run the tasks in the simulator)."""
    monkeypatch.setattr(device, "backend", lambda: "cuda")
    good = warmup.Task("gather", "hisparse_numba.compile_check", "compile_gather")
    bad = warmup.Task("missing", "hisparse_numba.warmup", "no_such_task")
    out = io.StringIO()
    assert warmup.warmup(jobs=2, out=out, tasks=[good]) == 1
    text = out.getvalue()
    assert "1 task, 2 processes" in text and "1/1 gather:" in text and "elapsed" in text
    assert "checked every task in this process" in text
    out = io.StringIO()
    with pytest.raises(RuntimeError, match="warmup failed for: missing"):
        warmup.warmup(jobs=2, out=out, tasks=[good, bad])
    assert "missing: FAILED: AttributeError" in out.getvalue()


def _save_entries(cache_dir: str, writer: int, count: int) -> None:
    from numba.cuda.core.caching import IndexDataCacheFile

    assert warmup.lock_cache_saves()
    cache = IndexDataCacheFile(cache_dir, "kernel", "stamp")
    for i in range(count):
        cache.save((writer, i), f"code of {writer}-{i}")


def test_concurrent_cache_saves_keep_every_entry(tmp_path):
    """Two processes saving specialisations of one kernel at once (what parallel warmup does):
    with the lock, every entry is in the index and points at its own data."""
    import multiprocessing

    from numba.cuda.core.caching import IndexDataCacheFile

    count = 25
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.starmap(_save_entries, [(str(tmp_path), w, count) for w in range(2)])
    cache = IndexDataCacheFile(str(tmp_path), "kernel", "stamp")
    assert len(cache._load_index()) == 2 * count
    for w in range(2):
        for i in range(count):
            assert cache.load((w, i)) == f"code of {w}-{i}"


def test_a_gpu_skips_what_only_the_simulator_launches(monkeypatch):
    sim_only = [t for t in warmup.LESSON_TASKS if t.simulator_only]
    assert sim_only
    monkeypatch.setattr(device, "backend", lambda: "simulator")
    assert set(sim_only) <= set(warmup.tasks_for("lessons"))
    monkeypatch.setattr(device, "backend", lambda: "cuda")
    assert not set(sim_only) & set(warmup.tasks_for("all"))


def test_the_simulator_skips_what_only_a_gpu_launches(monkeypatch):
    gpu_only = [t for t in warmup.LESSON_TASKS if t.gpu_only]
    assert gpu_only                              # lesson 16 times the ladder at sglang's sizes
    monkeypatch.setattr(device, "backend", lambda: "cuda")
    assert set(gpu_only) <= set(warmup.tasks_for("lessons"))
    monkeypatch.setattr(device, "backend", lambda: "simulator")
    assert not set(gpu_only) & set(warmup.tasks_for("all"))


def test_recorder_also_sees_launches_of_modules_that_imported_launch_by_name():
    import types as pytypes

    from hisparse_numba.hisparse.gather import gather_kernel

    module = pytypes.ModuleType("hisparse_numba._imported_launch_by_name")
    module.launch = device.launch
    import sys
    sys.modules[module.__name__] = module
    try:
        host = device.host_cache_array((8, 32), np.uint8)
        locs = device.to_device(np.arange(2, dtype=np.int64))
        with warmup.recording_launches() as seen:
            module.launch(gather_kernel, 1, 32, device.byte_words(host),
                          device.byte_words(device.xp.zeros((8, 32), np.uint8)), locs, locs, 4)
        assert len(seen) == 1 and module.launch is device.launch
    finally:
        del sys.modules[module.__name__]
