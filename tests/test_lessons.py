"""Every lesson runs top to bottom headless, and lessons are committed without outputs."""

import json
from pathlib import Path

import pytest

from hisparse_numba.lessons import runner

LESSONS_DIR = Path(__file__).resolve().parents[1] / "lessons"
LESSONS = runner.discover(LESSONS_DIR)


def test_there_are_lessons():
    assert LESSONS and LESSONS[0].id == "00"


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.path.stem for l in LESSONS])
def test_lesson_is_committed_without_outputs(lesson):
    nb = json.loads(lesson.path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, lesson.path.name


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.path.stem for l in LESSONS])
def test_lesson_runs_headless(lesson, tmp_path):
    result = runner.run_lesson(lesson, tmp_path)
    assert result.ok, result.line()
    assert (tmp_path / lesson.path.name).exists()


def _fake_executions(monkeypatch, failures):
    """Make ``runner._execute`` return the lesson unexecuted, with ``failures`` in turn."""
    import nbformat
    calls = []

    def execute(lesson, timeout):
        calls.append(lesson.id)
        return nbformat.read(lesson.path, as_version=4), failures[len(calls) - 1]

    monkeypatch.setattr(runner, "_execute", execute)
    return calls


def test_a_failure_of_the_notebook_machinery_gets_a_second_kernel(monkeypatch, tmp_path):
    calls = _fake_executions(monkeypatch, [AssertionError(), None])
    result = runner.run_lesson(LESSONS[0], tmp_path)
    assert result.ok and len(calls) == 2
    assert "second kernel; the first failed: AssertionError" in result.line()


def test_a_cell_timeout_is_not_retried(monkeypatch, tmp_path):
    from nbclient.exceptions import CellTimeoutError
    calls = _fake_executions(monkeypatch, [CellTimeoutError("cell timed out"), None])
    result = runner.run_lesson(LESSONS[0], tmp_path)
    assert not result.ok and len(calls) == 1
    assert "CellTimeoutError: cell timed out" in result.line()
