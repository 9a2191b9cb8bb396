"""The cold-cache notice (``compile_notice``): printed in a Jupyter kernel on a GPU when the
lesson's kernels are not marked compiled in the kernel cache; silent in the simulator, outside
Jupyter and once warmup (or the lessons flow) marked them. A fake cache: an empty folder."""

import sys

import pytest

from hisparse_numba import compile_marks, compile_notice, kernel_cache, warmup


@pytest.fixture
def fake_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setattr(compile_notice, "kernel_cache_enabled", lambda: True)
    monkeypatch.delenv("HISPARSE_NUMBA_VERSION", raising=False)
    return tmp_path / "kernels"


def test_a_cold_gpu_cache_gets_a_notice_with_the_lessons_seconds(fake_cache):
    line = compile_notice.notice("03", backend="cuda")
    seconds = sum(t.seconds for t in warmup.LESSON_TASKS if "03" in t.lessons and not t.simulator_only)
    assert line.startswith("compiling: lesson 03's kernels") and f"about {seconds:.0f} s" in line
    assert "hisparse-numba warmup --lessons" in line and "\n" not in line
    assert compile_notice.notice(None, backend="cuda").startswith("compiling: the lessons' kernels")


def test_nothing_in_the_simulator_or_with_the_cache_off(fake_cache, monkeypatch):
    assert compile_notice.notice("03", backend="simulator") is None
    monkeypatch.setattr(compile_notice, "kernel_cache_enabled", lambda: False)
    assert compile_notice.notice("03", backend="cuda") is None


def test_marked_lessons_are_warm_until_the_sources_or_the_rung_change(fake_cache, monkeypatch):
    compile_marks.mark_compiled(["03"])
    assert compile_notice.notice("03", backend="cuda") is None
    assert compile_notice.notice("01", backend="cuda") is not None
    monkeypatch.setenv("HISPARSE_NUMBA_VERSION", "tuned")
    assert compile_notice.notice("03", backend="cuda") is not None
    monkeypatch.delenv("HISPARSE_NUMBA_VERSION")
    monkeypatch.setattr(compile_marks, "source_digest", lambda: "0" * 64)
    assert compile_notice.notice("03", backend="cuda") is not None


def test_warmup_marks_the_lessons_whose_tasks_all_ran(fake_cache):
    tasks = warmup.tasks_for("lessons")
    broken = next(t for t in tasks if t.lessons == ("04", "06"))
    marked = warmup.mark_lessons([t for t in tasks if t is not broken])
    assert "00" in marked and "04" not in marked and "06" not in marked
    assert compile_notice.notice("00", backend="cuda") is None
    assert compile_notice.notice("06", backend="cuda") is not None


def test_the_lesson_comes_from_jupyters_session_name(monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/ada/lessons/04-spec-step-count.ipynb")
    assert compile_notice.current_lesson() == "04"
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/ada/scratch.ipynb")
    assert compile_notice.current_lesson() is None


def test_printed_only_inside_a_jupyter_kernel(fake_cache, monkeypatch, capsys):
    monkeypatch.setattr(compile_notice, "notice", lambda lesson_id: "compiling: test line")
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    compile_notice.print_if_cold()
    assert capsys.readouterr().out == ""
    monkeypatch.setitem(sys.modules, "ipykernel", object())
    compile_notice.print_if_cold()
    assert capsys.readouterr().out == "compiling: test line\n"


def test_the_mark_lives_in_the_kernel_cache(fake_cache):
    assert str(compile_marks.mark_path("3")).startswith(kernel_cache.kernel_cache_dir())
    assert compile_marks.mark_path("3").name == "03"


def test_the_notice_says_when_a_warmup_is_compiling_now(fake_cache):
    assert not compile_marks.warmup_running()
    assert "hisparse-numba warmup --lessons" in compile_notice.notice("03", backend="cuda")
    with compile_marks.compiling():
        assert compile_marks.warmup_running()
        assert "a warmup is compiling them in the background now" in compile_notice.notice("03", backend="cuda")
    assert not compile_marks.warmup_running()
