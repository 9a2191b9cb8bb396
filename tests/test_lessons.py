"""Every lesson runs headless in both forms and is committed without outputs.

Shipped form: each exercise cell (tagged ``exercise``) prints a ``wrong:`` or ``not yet:`` line and
nothing raises outside ``raises-exception`` cells. Solved form: ``lessons/solutions/NN.py`` replaces
the exercise cells and every one prints ``right``. The runner's own logic is checked on a tiny
lesson written for the purpose (``tiny_lesson``), so that it does not depend on a real lesson."""

import json
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


# ----------------------------------------------------------------- the runner on a tiny lesson

STUB = '''\
def plan_for():
    raise NotImplementedError("hint: one host item, one device row (about 2 lines)")

try:
    src, dst = plan_for()
    print("right: one item" if (src, dst) == (5, 1) else "wrong: not that item")
except NotImplementedError as exc:
    print(f"not yet: {exc}")
'''
ANSWER = STUB.replace('raise NotImplementedError("hint: one host item, one device row (about 2 lines)")',
                      "return 5, 1")


@pytest.fixture
def tiny_lesson(tmp_path):
    """A one-exercise lesson in the exercise conventions: the exercise cell tagged and stubbed,
    its answer in solutions/00.py, the notebook metadata filled in."""
    lessons = tmp_path / "lessons"
    (lessons / "solutions").mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 00 · A tiny lesson for the runner's tests"),
                nbformat.v4.new_code_cell("print('setup')"),
                nbformat.v4.new_code_cell(STUB, metadata={"tags": ["exercise"], "exercise": "00-a"})]
    nb.metadata["hisparse"] = {"minutes": 20, "prerequisites": [], "objectives": ["gather"],
                               "error": "none: the on-ramp", "kernel_module": "hisparse_numba.hisparse.gather"}
    nbformat.write(nb, lessons / "00-tiny.ipynb")
    (lessons / "solutions" / "00.py").write_text(f"# exercise: 00-a\n{ANSWER}\n")
    return runner.discover(lessons)[0]


def test_sections_and_substitution(tmp_path, tiny_lesson):
    sections = sol.read_sections(tiny_lesson.path.parent / "solutions" / "00.py")
    assert list(sections) == ["00-a"] and "return 5, 1" in sections["00-a"]
    solved, shipped = runner.load(tiny_lesson, solved=True), runner.load(tiny_lesson)
    [(index, ex)] = sol.exercise_cells(solved)
    assert ex == "00-a" and solved.cells[index].source == sections["00-a"]
    assert "NotImplementedError(" in shipped.cells[index].source and "return 5, 1" not in shipped.cells[index].source


def test_mismatched_solutions_are_named(tiny_lesson):
    (tiny_lesson.path.parent / "solutions" / "00.py").write_text("# exercise: 00-b\npass\n")
    with pytest.raises(sol.SolutionsFileError, match=r"no section for \['00-a'\]; no cell for \['00-b'\]"):
        runner.load(tiny_lesson, solved=True)


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
def test_the_runner_on_a_tiny_lesson_in_both_forms(tiny_lesson, tmp_path, capfd):
    shipped = runner.run_lesson(tiny_lesson, tmp_path / "out", progress=False)
    assert shipped.ok and shipped.verdicts == [("00-a", "not yet")], shipped.line()
    solved = runner.run_lesson(tiny_lesson, tmp_path / "out", solved=True, progress=False)
    assert solved.ok and solved.verdicts == [("00-a", "right")], solved.line()
    assert "[00-a right]" in solved.line() and "solved" in solved.line()
    assert tiny_lesson.line().split()[:4] == ["00", "A", "tiny", "lesson"]
    assert "20 min" in tiny_lesson.line() and "none: the on-ramp" in tiny_lesson.line()
    out, err = capfd.readouterr()               # the kernels' own stderr included
    assert "without encryption" not in out + err and "Parent appears to have exited" not in out + err


def _printing(text):
    """A fake ``runner._execute`` whose exercise cells all printed ``text``."""
    def execute(lesson, timeout, solved=False, progress=True):
        nb = runner.load(lesson, solved)
        for index, _ in sol.exercise_cells(nb):
            nb.cells[index].outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        return nb, None
    return execute


def test_a_shipped_exercise_that_prints_right_fails_the_shipped_form(tiny_lesson, tmp_path, monkeypatch):
    """A solution left in a shipped notebook is caught (without running a kernel)."""
    monkeypatch.setattr(runner, "_execute", _printing("right: well done\n"))
    result = runner.run_lesson(tiny_lesson, tmp_path)
    assert not result.ok and "should print wrong:/not yet:: 00-a printed right" in result.line()
    assert runner.run_lesson(tiny_lesson, tmp_path, solved=True).ok


def _fake_executions(monkeypatch, failures):
    """Make ``runner._execute`` return the lesson unexecuted, with ``failures`` in turn."""
    calls = []

    printed = _printing("not yet: write it\n")

    def execute(lesson, timeout, solved=False, progress=True):
        calls.append(lesson.id)
        return printed(lesson, timeout, solved)[0], failures[len(calls) - 1]

    monkeypatch.setattr(runner, "_execute", execute)
    return calls


def test_a_failure_of_the_notebook_machinery_gets_a_second_kernel(monkeypatch, tmp_path, tiny_lesson):
    calls = _fake_executions(monkeypatch, [AssertionError(), None])
    result = runner.run_lesson(tiny_lesson, tmp_path)
    assert result.ok and len(calls) == 2
    assert "second kernel; the first failed: AssertionError" in result.line()


def test_a_cell_timeout_is_not_retried(monkeypatch, tmp_path, tiny_lesson):
    from nbclient.exceptions import CellTimeoutError
    calls = _fake_executions(monkeypatch, [CellTimeoutError("cell timed out"), None])
    result = runner.run_lesson(tiny_lesson, tmp_path)
    assert not result.ok and len(calls) == 1
    assert "CellTimeoutError: cell timed out" in result.line()
