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
