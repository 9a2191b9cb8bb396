"""Every lesson runs headless in both forms and is committed without outputs.

Shipped form: each exercise cell (tagged ``exercise``) prints a ``wrong:`` or ``not yet:`` line and
nothing raises outside ``raises-exception`` cells. Solved form: ``lessons/solutions/NN.py`` replaces
the exercise cells and every one prints ``right``. The runner's own logic is checked on a copy of
lesson 00 converted by hand to the exercise conventions (``converted_00``)."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from hisparse_numba.lessons import runner
from hisparse_numba.lessons import solutions as sol

LESSONS_DIR = Path(__file__).resolve().parents[1] / "lessons"
LESSONS = runner.discover(LESSONS_DIR)
IDS = [l.path.stem for l in LESSONS]


def test_there_are_lessons():
    assert LESSONS and LESSONS[0].id == "00"


@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_lesson_is_committed_without_outputs(lesson):
    nb = json.loads(lesson.path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, lesson.path.name


@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_solutions_match_the_exercise_cells(lesson):
    nb = nbformat.read(lesson.path, as_version=4)
    exercises = [ex for _, ex in sol.exercise_cells(nb)]
    assert len(set(exercises)) == len(exercises), f"{lesson.path.name}: an exercise id is used twice"
    for ex in exercises:
        assert ex.startswith(f"{lesson.id}-"), f"{lesson.path.name}: exercise id {ex} is not {lesson.id}-x"
    path = sol.solutions_path(LESSONS_DIR, lesson.id)
    if exercises:
        assert path.is_file(), f"{lesson.path.name} has exercises {exercises} but no {path.name}"
    if path.is_file():
        assert sorted(sol.read_sections(path)) == sorted(exercises), f"{path.name} vs {lesson.path.name}"


def test_every_solutions_file_belongs_to_a_lesson():
    ids = {l.id for l in LESSONS}
    for path in sorted((LESSONS_DIR / "solutions").glob("*.py")):
        assert path.stem in ids, f"{path.name} has no lesson"


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_lesson_runs_headless_as_shipped(lesson, tmp_path):
    result = runner.run_lesson(lesson, tmp_path, progress=False)
    assert result.ok, result.line()
    assert all(v in ("wrong", "not yet") for _, v in result.verdicts), result.line()
    assert (tmp_path / lesson.path.name).exists()


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_lesson_runs_headless_solved(lesson, tmp_path):
    result = runner.run_lesson(lesson, tmp_path, solved=True, progress=False)
    assert result.ok, result.line()
    assert all(v == "right" for _, v in result.verdicts), result.line()
    assert (tmp_path / runner.SOLVED_SUBDIR / lesson.path.name).exists()


# ----------------------------------------------------------------- the runner on a converted copy

STUB_00 = '''\
def plan_for():
    raise NotImplementedError("hint: one host item, one device row (about 2 lines)")

try:
    src, dst = plan_for()
except NotImplementedError as exc:
    print(f"not yet: {exc}")
'''


@pytest.fixture
def converted_00(tmp_path):
    """Lesson 00 as the exercise conventions want it: the exercise cell tagged and stubbed, its
    answer in solutions/00.py, the notebook metadata filled in."""
    lessons = tmp_path / "lessons"
    (lessons / "solutions").mkdir(parents=True)
    nb = nbformat.read(LESSONS[0].path, as_version=4)
    index = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "your answer" in c.source)
    answer = nb.cells[index].source
    nb.cells[index].source = STUB_00
    nb.cells[index].metadata.update({"tags": ["exercise"], "exercise": "00-a"})
    nb.metadata["hisparse"] = {"minutes": 20, "prerequisites": [], "objectives": ["gather"],
                               "error": "none: the on-ramp", "kernel_module": "hisparse_numba.hisparse.gather"}
    nbformat.write(nb, lessons / LESSONS[0].path.name)
    (lessons / "solutions" / "00.py").write_text(f"# exercise: 00-a\n{answer}\n")
    return runner.discover(lessons)[0]


def test_sections_and_substitution(tmp_path, converted_00):
    sections = sol.read_sections(converted_00.path.parent / "solutions" / "00.py")
    assert list(sections) == ["00-a"] and "your answer" in sections["00-a"]
    solved, shipped = runner.load(converted_00, solved=True), runner.load(converted_00)
    [(index, ex)] = sol.exercise_cells(solved)
    assert ex == "00-a" and solved.cells[index].source == sections["00-a"]
    assert "NotImplementedError" in shipped.cells[index].source


def test_mismatched_solutions_are_named(converted_00):
    (converted_00.path.parent / "solutions" / "00.py").write_text("# exercise: 00-b\npass\n")
    with pytest.raises(sol.SolutionsFileError, match=r"no section for \['00-a'\]; no cell for \['00-b'\]"):
        runner.load(converted_00, solved=True)


def test_verdicts_are_read_from_the_printed_lines():
    def cell(text, error=False):
        c = nbformat.v4.new_code_cell("", metadata={"tags": ["exercise"], "exercise": "01-a"})
        c.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        if error:
            c.outputs.append(nbformat.v4.new_output("error", ename="E", evalue="", traceback=[]))
        return c
    assert sol.verdict(cell("building...\nright: all rows match\n")) == "right"
    assert sol.verdict(cell("wrong: row 3 holds token 7\n")) == "wrong"
    assert sol.verdict(cell("not yet: write plan_for\n")) == "not yet"
    assert sol.verdict(cell("nothing\n")) == "none"
    assert sol.verdict(cell("right\n", error=True)) == "error"


@pytest.mark.slow
def test_the_runner_on_a_converted_lesson_in_both_forms(converted_00, tmp_path, capfd):
    shipped = runner.run_lesson(converted_00, tmp_path / "out", progress=False)
    assert shipped.ok and shipped.verdicts == [("00-a", "not yet")], shipped.line()
    solved = runner.run_lesson(converted_00, tmp_path / "out", solved=True, progress=False)
    assert solved.ok and solved.verdicts == [("00-a", "right")], solved.line()
    assert "[00-a right]" in solved.line() and "solved" in solved.line()
    assert converted_00.line().split()[:7] == ["00", "The", "hot", "buffer:", "HiSparse", "in", "one"]
    assert "20 min" in converted_00.line() and "none: the on-ramp" in converted_00.line()
    out, err = capfd.readouterr()               # the kernels' own stderr included
    assert "without encryption" not in out + err and "Parent appears to have exited" not in out + err


def test_a_shipped_exercise_that_prints_right_fails_the_shipped_form(converted_00, tmp_path, monkeypatch):
    """A solution left in a shipped notebook is caught (without running a kernel)."""
    def execute(lesson, timeout, solved=False, progress=True):
        nb = runner.load(lesson, solved)
        for _, cell in [(i, nb.cells[i]) for i, _ in sol.exercise_cells(nb)]:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="right: well done\n")]
        return nb, None
    monkeypatch.setattr(runner, "_execute", execute)
    result = runner.run_lesson(converted_00, tmp_path)
    assert not result.ok and "should print wrong:/not yet:: 00-a printed right" in result.line()
    assert runner.run_lesson(converted_00, tmp_path, solved=True).ok


def _fake_executions(monkeypatch, failures):
    """Make ``runner._execute`` return the lesson unexecuted, with ``failures`` in turn."""
    calls = []

    def execute(lesson, timeout, solved=False, progress=True):
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
