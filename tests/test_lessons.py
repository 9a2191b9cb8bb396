"""Every lesson runs headless in both forms and is committed without outputs.

Shipped form: each exercise cell (tagged ``exercise``) prints a ``wrong:`` or ``not yet:`` line,
nothing raises outside ``raises-exception`` cells, and a lesson that draws holds its figures as
PNG images in the executed notebook and its HTML. Solved form: ``lessons/solutions/NN.py``
replaces the exercise cells and every one prints ``right``. One block's slides are made from the
shipped runs (each lesson runs once per session). The runner's own logic, ``lessons check`` and
``lessons list`` are checked on a tiny lesson written for the purpose (``tiny_lesson``), so that
they do not depend on a real lesson. Every checker says ``not yet`` to ``None``."""

import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

from hisparse_numba import cli
from hisparse_numba.lessons import progress, runner, slides, syllabus
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


@pytest.fixture(scope="session")
def shipped_runs(tmp_path_factory):
    """``run(lesson)``: the lesson's shipped run, once per session, its executed copy and HTML in
    ``run.out``."""
    out = tmp_path_factory.mktemp("shipped")
    results = {}

    def run(lesson):
        if lesson.id not in results:
            results[lesson.id] = runner.run_lesson(lesson, out, progress=False)
        return results[lesson.id]
    run.out = out
    return run


DRAWS = re.compile(r"\bdraw|\bshow\(|plt\.show")


def draws(nb) -> bool:
    """Whether a code cell outside the exercises draws a figure."""
    exercises = {index for index, _ in sol.exercise_cells(nb)}
    return any(c.cell_type == "code" and i not in exercises and DRAWS.search(c.source)
               for i, c in enumerate(nb.cells))


def images(nb) -> int:
    """The ``image/png`` outputs of an executed notebook."""
    return sum("image/png" in out.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for out in c.get("outputs", []) if out.get("output_type") == "display_data")


def html_images(path: Path) -> int:
    return len(re.findall(r'<img [^>]*src="data:image/png;base64,', path.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_lesson_runs_headless_as_shipped(lesson, shipped_runs):
    result = shipped_runs(lesson)
    assert result.ok, result.line()
    assert all(v in ("wrong", "not yet") for _, v in result.verdicts), result.line()
    executed = nbformat.read(shipped_runs.out / lesson.path.name, as_version=4)
    if draws(nbformat.read(lesson.path, as_version=4)):
        assert images(executed) >= 1, f"{lesson.path.name}: its figures are not in the executed notebook"
        assert html_images(shipped_runs.out / lesson.path.with_suffix(".html").name) >= images(executed)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=IDS)
def test_lesson_runs_headless_solved(lesson, tmp_path):
    result = runner.run_lesson(lesson, tmp_path, solved=True, progress=False)
    assert result.ok, result.line()
    assert all(v == "right" for _, v in result.verdicts), result.line()
    assert (tmp_path / runner.SOLVED_SUBDIR / lesson.path.name).exists()


SYLLABUS = Path(__file__).resolve().parents[1] / "docs" / "syllabus.md"


@pytest.mark.slow
def test_slides_for_one_block(shipped_runs, tmp_path):
    """The smallest block's deck: reveal.js HTML with every lesson's headings and figures, and no
    code."""
    ids = {l.id for l in LESSONS}
    block = min((b for b in syllabus.read(SYLLABUS) if all(l.id in ids for l in b.lessons)),
                key=lambda b: b.minutes)
    lessons = [l for l in LESSONS if l.id in {s.id for s in block.lessons}]
    for lesson in lessons:
        shipped_runs(lesson)
    figures = sum(images(nbformat.read(shipped_runs.out / l.path.name, as_version=4)) for l in lessons)
    [deck] = slides.build(tmp_path / "slides", [block.number], LESSONS_DIR, SYLLABUS, shipped_runs.out)
    html = deck.read_text()
    assert "reveal" in html.lower() and f"Block {block.number}" in html
    for lesson in lessons:
        assert f"{lesson.id} · " in html, lesson.id              # each lesson's own heading
    assert html_images(deck) == figures > 0
    assert "from hisparse_numba" not in html and "import numpy" not in html     # no code
    assert deck.name in (tmp_path / "slides" / "index.html").read_text()


def test_slides_name_an_unknown_block(tmp_path):
    with pytest.raises(ValueError, match="no block 99 in the syllabus"):
        slides.build(tmp_path, [99], LESSONS_DIR, SYLLABUS, tmp_path)


def test_lesson_cells_keep_markdown_and_figures_only():
    nb = nbformat.v4.new_notebook()
    figure = nbformat.v4.new_code_cell("show(fig)")
    figure.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "iVBO", "text/plain": "<Figure>"}),
                      nbformat.v4.new_output("stream", name="stdout", text="printed")]
    answer = nbformat.v4.new_code_cell("draw_mine()", metadata={"tags": ["exercise"], "exercise": "00-a"})
    answer.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "XXXX"})]
    nb.cells = [nbformat.v4.new_markdown_cell("# 00 · Title"), nbformat.v4.new_markdown_cell("prose"),
                figure, nbformat.v4.new_markdown_cell("## The fix"), answer]
    cells = slides.lesson_cells(nb)
    assert [(c.cell_type, c.metadata.slideshow["slide_type"]) for c in cells] == [
        ("markdown", "slide"), ("markdown", "subslide"), ("code", "subslide"), ("markdown", "slide")]
    assert cells[2].source == "" and cells[2].outputs == [
        nbformat.v4.new_output("display_data", data={"image/png": "iVBO"})]


# ----------------------------------------------------------------- checkers and None

def _none_calls():
    from hisparse_numba.kv_canary.examples import plan_problem
    from hisparse_numba.lessons import (ex00, ex01, ex02, ex03, ex04, ex05, ex06, ex07, ex08, ex09, ex10,
                                        ex11, ex12, ex13, ex14)
    from hisparse_numba.lessons.common import small_problem

    single = small_problem(0, batch=1)
    canary = plan_problem([1, 2], [4, 3], [1, 1], max_reqs=3, max_seq_len=16)
    calls = {"00-a": ex00.check_pair_and_chunk, "00-b": ex00.check_next_copy,
             "00-c": lambda a: ex00.check_misses(single, a), "01-a": ex01.check, "02-a": ex02.check_plan_step,
             "03-a": ex03.check_count_view, "04-a": ex04.check_choose, "05-a": ex05.check_make_plan,
             "06-a": ex06.check_plan_kwargs, "07-a": ex07.check_strides_match, "08-a": ex08.check_plan_rows,
             "09-a": lambda a: ex09.check(single, a, a), "10-a": ex10.check_pad,
             "10-b": lambda a: ex10.check_aligned_offsets(a, 584),
             "11-a": lambda a: ex11.check_bytes(a, a, pool_items=10, item_size_bytes=16, misses=2),
             "12-a": lambda a: ex12.check_capacity(canary, a), "13-a": ex13.check_corrupted_rows}
    calls.update({f"14 {name}": getattr(ex14, name) for name in dir(ex14) if name.startswith("check_")})
    return calls


@pytest.mark.parametrize("name", sorted(_none_calls()))
def test_every_checker_says_not_yet_to_none(name, capsys):
    assert _none_calls()[name](None) is False
    out = capsys.readouterr().out
    assert out.startswith("not yet: ") and out.count("\n") == 1, out


def test_a_function_without_a_return_is_not_yet(capsys):
    from hisparse_numba.lessons import ex00, ex04, ex10

    def choose(steps):
        pass
    for check in (ex04.check_choose, ex10.check_pad, ex00.check_next_copy):
        assert check(lambda *a: None) is False
        assert "returned None: finish it with a return statement" in capsys.readouterr().out
    assert not ex04.check_choose(choose)
    assert capsys.readouterr().out.startswith("not yet: choose returned None")


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
FIGURES = """\
import matplotlib.pyplot as plt
from hisparse_numba.lessons.common import figure, show

fig, (ax,) = figure(3, 2)
ax.plot([0, 1], [1, 0])
show(fig)                       # the lessons' way
plt.plot([0, 1], [0, 1])
plt.show()                      # plain pyplot: the kernel's inline backend
"""


@pytest.fixture
def tiny_lesson(tmp_path):
    """A one-exercise lesson in the exercise conventions: the exercise cell tagged and stubbed,
    its answer in solutions/00.py, the notebook metadata filled in."""
    lessons = tmp_path / "lessons"
    (lessons / "solutions").mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 00 · A tiny lesson for the runner's tests"),
                nbformat.v4.new_code_cell("print('setup')"),
                nbformat.v4.new_code_cell(FIGURES),
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
def test_the_runner_on_a_tiny_lesson_in_both_forms(tiny_lesson, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")     # as in a GPU script: the kernel still draws inline
    shipped = runner.run_lesson(tiny_lesson, tmp_path / "out", progress=False)
    assert shipped.ok and shipped.verdicts == [("00-a", "not yet")], shipped.line()
    executed = nbformat.read(tmp_path / "out" / tiny_lesson.path.name, as_version=4)
    assert images(executed) == 2 and html_images(tmp_path / "out" / "00-tiny.html") == 2
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
    """A solution left in a shipped notebook is caught (without running a kernel); the line points a
    learner who ran their own copy to ``lessons check``."""
    monkeypatch.setattr(runner, "_execute", _printing("right: well done\n"))
    result = runner.run_lesson(tiny_lesson, tmp_path)
    assert not result.ok and "should print wrong:/not yet: (a shipped lesson is unsolved): 00-a printed right" \
        in result.line()
    assert "lessons check --dir" in result.line()
    assert runner.run_lesson(tiny_lesson, tmp_path, solved=True).ok


def test_the_run_summary_counts_exercises_right(tiny_lesson):
    def result(ok, *verdicts):
        return runner.LessonResult(tiny_lesson, "simulator", 1.0, ok, "", "shipped",
                                   [(f"00-{x}", v) for x, v in zip("abc", verdicts)])
    shipped = [result(True, "wrong", "not yet"), result(True, "not yet")]
    assert runner.summary(shipped, solved=False) == (
        "notebooks: 2 of 2 ran as expected, 0 failed; exercises right: 0/3 (the shipped form leaves "
        "every exercise to the learner)")
    copy = [result(False, "right", "not yet")]                  # a learner's copy run as shipped
    assert runner.summary(copy, solved=False) == "notebooks: 0 of 1 ran as expected, 1 failed; exercises right: 1/2"
    solved = [result(True, "right", "right"), result(False, "right", "wrong")]
    assert runner.summary(solved, solved=True) == "notebooks: 1 of 2 ran as expected, 1 failed; exercises right: 3/4"


def test_list_wraps_a_long_title_at_words():
    title = "Capstone: an undersized miss plan corrupts KV silently, and kv-canary names the slot"
    lesson = runner.Lesson("13", title, Path("13-x.ipynb"), {"minutes": 30, "prerequisites": ["01", "12"],
                                                          "error": "ValueError: " + "word " * 40})
    lines = lesson.line().splitlines()
    assert len(lines) == 2 and lines[0].startswith("13  Capstone: an undersized") and "30 min" in lines[0]
    assert " ".join(l[4:].strip() if i else l[4:4 + runner.TITLE_WIDTH].strip() for i, l in enumerate(lines)) == title
    assert lines[0].rstrip().endswith("word ...") and len(lines[0]) < 200


# ----------------------------------------------------------------- lessons check (a learner's copy)

def _learner_copy(folder: Path) -> Path:
    """Two tiny lessons as a learner left them: 00-a answered; in 01 a cell that raises before the
    exercises, 01-a raising NameError, 01-b still the stub."""
    folder.mkdir()
    first = nbformat.v4.new_notebook()
    first.cells = [nbformat.v4.new_markdown_cell("# 00 · Answered"),
                   nbformat.v4.new_code_cell(ANSWER, metadata={"tags": ["exercise"], "exercise": "00-a"})]
    nbformat.write(first, folder / "00-answered.ipynb")
    second = nbformat.v4.new_notebook()
    second.cells = [nbformat.v4.new_markdown_cell("# 01 · Half done"),
                    nbformat.v4.new_code_cell("1 / 0"),
                    nbformat.v4.new_code_cell("print(plan)", metadata={"tags": ["exercise"], "exercise": "01-a"}),
                    nbformat.v4.new_code_cell(STUB, metadata={"tags": ["exercise"], "exercise": "01-b"})]
    nbformat.write(second, folder / "01-half-done.ipynb")
    return folder


@pytest.mark.slow
def test_check_says_right_wrong_and_not_yet_and_writes_the_report(tmp_path, capsys):
    copy = _learner_copy(tmp_path / "my-lessons")
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    code = cli.main(["lessons", "check", "--dir", str(copy), "--report", str(tmp_path / "ada.json"),
                     "--name", "ada"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^00-a  right +one item$", out, re.M), out
    assert re.search(r"^01-a  wrong +the cell raised NameError: name 'plan' is not defined$", out, re.M), out
    assert re.search(r"^01-b  not yet +hint: one host item", out, re.M), out
    assert "lesson 01: cell 1 raised ZeroDivisionError" in out and "FAILED" not in out
    assert "exercises right: 1/3" in out
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before       # nothing written there
    report = json.loads((tmp_path / "ada.json").read_text())
    assert report["learner"] == "ada" and (report["right"], report["total"]) == (1, 3)
    assert [(e["id"], e["verdict"]) for e in report["exercises"]] == [
        ("00-a", "right"), ("01-a", "wrong"), ("01-b", "not yet")]
    assert [(l["id"], l["ran"]) for l in report["lessons"]] == [("00", True), ("01", True)]
    assert report["lessons"][1]["problem"].startswith("cell 1 raised ZeroDivisionError")


def test_an_exercise_cell_that_printed_no_verdict_is_not_yet():
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="thinking...\n")]
    verdict = progress.exercise_verdict(cell, "09-a", "09")
    assert (verdict.verdict, verdict.line().split()[:3]) == ("not yet", ["09-a", "not", "yet"])
    cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text="wrong: slot 2 holds a hit\n"))
    assert progress.exercise_verdict(cell, "09-a", "09").message == "slot 2 holds a hit"


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
