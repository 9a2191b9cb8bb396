"""Run the lesson notebooks headless with nbclient and report one line per lesson.

A lesson is ``lessons/NN-name.ipynb``; its id is ``NN``, its title the first Markdown heading,
and its notebook metadata ``"hisparse"`` gives minutes, prerequisites, objectives, the error it
teaches and its kernel module (absent fields read as unknown). Cells run top to bottom in a fresh
kernel of *this* Python (so the lesson sees the same hisparse-numba and the same backend). A cell
tagged ``raises-exception`` must raise (it reproduces the lesson's error); an error anywhere else
fails the lesson.

Two forms: *shipped* (the exercise cells hold stubs; their checkers print ``wrong:``/``not yet:``)
and *solved* (``solved=True``: each exercise cell replaced by its section of
``lessons/solutions/NN.py``; every checker must print ``right``). Executed copies and HTML
renderings go to ``build/lessons/`` (``build/lessons/solved/`` for the solved form); the kernel
runs matplotlib's inline backend, as JupyterLab's does, so both hold the lesson's figures as
PNG images. A learner's own copy, run as it is, is ``progress.py``'s business.

Lessons are read from ``./lessons`` when it exists, else from the source checkout's ``lessons/``,
else from the copy a wheel carries inside the package (``hisparse_numba/lessons/notebooks``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import site
import sys
import sysconfig
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import solutions as sol

RAISES_TAG = "raises-exception"
PACKAGED_LESSONS = Path(__file__).resolve().parent / "notebooks"
SOLVED_SUBDIR = "solved"
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
TITLE_WIDTH = 46


def fit(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, shortened at a word boundary (``...``)."""
    return textwrap.shorten(text, width, placeholder=" ...") if len(text) > width else text


@dataclass
class Lesson:
    id: str
    title: str
    path: Path
    meta: dict = field(default_factory=dict)

    @property
    def minutes(self):
        return self.meta.get("minutes")

    @property
    def prerequisites(self) -> list:
        return list(self.meta.get("prerequisites", []))

    @property
    def error(self) -> str:
        return self.meta.get("error", "")

    def line(self) -> str:
        """``lessons list``'s entry: id, title, minutes, prerequisites, the error it raises. A long
        title wraps onto indented lines at word boundaries; the error is shortened at one."""
        minutes = f"{self.minutes:>3} min" if self.minutes is not None else "  ? min"
        after = "after " + ",".join(self.prerequisites) if self.prerequisites else ""
        title = textwrap.wrap(self.title, TITLE_WIDTH) or [""]
        head = f"{self.id}  {title[0]:<{TITLE_WIDTH}}  {minutes}  {after:<14}  {fit(self.error, 90)}"
        return "\n".join([head.rstrip()] + [f"    {more}" for more in title[1:]])


@dataclass
class LessonResult:
    lesson: Lesson
    backend: str
    seconds: float
    ok: bool
    detail: str = ""
    form: str = "shipped"
    verdicts: list = field(default_factory=list)

    def line(self) -> str:
        status = f"ok{self.detail}" if self.ok else f"FAILED {self.detail}"
        line = (f"{self.lesson.id:>3}  {fit(self.lesson.title, 44):<44}  {self.form:<7}  {self.backend:<9}  "
                f"{self.seconds:6.1f}s  {status}")
        if self.verdicts:
            line += "  [" + ", ".join(f"{ex} {v}" for ex, v in self.verdicts) + "]"
        return line


def default_lessons_dir() -> Path:
    """``./lessons``, else the source checkout's ``lessons/``, else the wheel's packaged copy."""
    for candidate in (Path.cwd() / "lessons", Path(__file__).resolve().parents[2] / "lessons"):
        if candidate.is_dir() and any(candidate.glob("[0-9][0-9]-*.ipynb")):
            return candidate
    return PACKAGED_LESSONS


def notebook_title(nb: dict) -> str:
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            for line in source.splitlines():
                if line.startswith("#"):
                    return re.sub(r"^\d+\s*[·.:-]\s*", "", line.lstrip("#").strip())
    return "(untitled)"


def discover(lessons_dir: Path | None = None) -> list[Lesson]:
    """The lessons in ``lessons_dir``, read as plain JSON: listing needs no lessons extra."""
    lessons_dir = Path(lessons_dir or default_lessons_dir())
    lessons = []
    for path in sorted(lessons_dir.glob("[0-9][0-9]-*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        meta = nb.get("metadata", {}).get("hisparse", {})
        lessons.append(Lesson(path.name.split("-", 1)[0], notebook_title(nb), path,
                              dict(meta) if isinstance(meta, dict) else {}))
    return lessons


def select(lessons: list[Lesson], ids) -> list[Lesson]:
    if not ids:
        return lessons
    wanted = {str(i).zfill(2) for i in ids}
    unknown = wanted - {l.id for l in lessons}
    if unknown:
        known = ", ".join(l.id for l in lessons) or "none (no lesson notebooks found; pass --dir)"
        raise SystemExit(f"no lesson with id {', '.join(sorted(unknown))}; known: {known}")
    return [l for l in lessons if l.id in wanted]


def kernel_env() -> dict:
    """The environment the lesson's kernel starts with: this process's, with matplotlib's inline
    backend (what JupyterLab's kernel uses: a figure becomes an ``image/png`` output, even where
    this process has ``MPLBACKEND=Agg``) and, when hisparse_numba is imported from a source tree
    rather than an installed copy, that tree on ``PYTHONPATH`` (the lesson imports the same one),
    and the lessons' rung of each kernel ladder (``lesson_kernel_env``)."""
    env = dict(os.environ, MPLBACKEND=INLINE_BACKEND)
    root = str(Path(__file__).resolve().parents[2])
    installed = set(site.getsitepackages()) | {site.getusersitepackages()} | {
        sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    if root not in installed:
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(lesson_kernel_env())
    return env


def lesson_kernel_env() -> dict:
    """What a lesson's kernel adds to its environment: ``HISPARSE_NUMBA_VERSION``, the rung of each
    kernel ladder that launchers run by default (this process's value when set, else version 1:
    the plain kernels the lessons point to, which also compile faster; ``version_default.py``)."""
    from ..version_default import LESSON_VERSION, VERSION_ENV

    return {VERSION_ENV: os.environ.get(VERSION_ENV) or str(LESSON_VERSION)}


@functools.cache
def _kernel_dir() -> str:
    """A Jupyter data dir whose ``python3`` (and ``hisparse-numba``) kernel is this very interpreter."""
    root = tempfile.mkdtemp(prefix="hisparse-kernel-")
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (hisparse-numba)",
        "language": "python",
        "env": lesson_kernel_env(),
    }
    for name in ("python3", "hisparse-numba"):
        spec_dir = Path(root, "kernels", name)
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return root


def first_error(nb, skip=()):
    """``(cell index, "Name: text")`` of the first code cell that raised, the cells tagged
    ``raises-exception`` and those in ``skip`` aside; None when there is none."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or index in skip:
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and RAISES_TAG not in cell.metadata.get("tags", []):
                return index, f"{out.get('ename')}: {out.get('evalue')}"
    return None


def _unraised(nb):
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and RAISES_TAG in cell.metadata.get("tags", []):
            if not any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                return index
    return None


def load(lesson: Lesson, solved: bool = False):
    """The lesson's notebook, with the solutions in place of the exercise stubs when ``solved``."""
    import nbformat

    nb = nbformat.read(lesson.path, as_version=4)
    if solved and sol.exercise_cells(nb):
        path = sol.solutions_path(lesson.path.parent, lesson.id)
        if not path.is_file():
            raise FileNotFoundError(f"lesson {lesson.id} has exercise cells but no {path}")
        sol.solve(nb, sol.read_sections(path), lesson.path.name)
    return nb


class _Progress:
    """Per-cell progress on stderr: a rewritten status line on a terminal, else one line per slow cell."""

    SLOW_S = 10.0

    def __init__(self, lesson: Lesson, total: int, stream=None):
        self.lesson, self.total, self.stream = lesson, total, stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.number, self.t0 = 0, 0.0

    def start(self, cell=None, cell_index=None, **_):
        self.number, self.t0 = self.number + 1, time.perf_counter()
        if self.tty:
            self.stream.write(f"\r  {self.lesson.id}  code cell {self.number}/{self.total} ...   ")
            self.stream.flush()

    def done(self, cell=None, cell_index=None, **_):
        took = time.perf_counter() - self.t0
        if not self.tty and took > self.SLOW_S:
            print(f"  {self.lesson.id}  code cell {self.number}/{self.total} (cell {cell_index}) took "
                  f"{took:.0f} s", file=self.stream, flush=True)

    def close(self):
        if self.tty:
            self.stream.write("\r" + " " * 40 + "\r")
            self.stream.flush()


def _kernel_manager():
    """A kernel manager on IPC sockets where the OS has them (no TCP "without encryption" warning)."""
    from jupyter_client.manager import KernelManager

    if os.name == "posix":
        return KernelManager(kernel_name="python3", transport="ipc",
                             ip=tempfile.mkdtemp(prefix="hisparse-ipc-") + "/kernel")
    return KernelManager(kernel_name="python3")


def _execute(lesson: Lesson, timeout: int, solved: bool = False, progress: bool = True,
             allow_errors: bool = False):
    """Run the notebook in a fresh kernel: (executed notebook, failure of the machinery or None).

    A cell's own error is not a failure here; it stays in the outputs for ``first_error``. The
    run stops at it unless ``allow_errors`` (a learner's copy: every exercise gets its verdict)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    _use_own_kernelspec()
    nb = load(lesson, solved)
    hooks = {}
    if progress:
        meter = _Progress(lesson, sum(c.cell_type == "code" for c in nb.cells))
        hooks = {"on_cell_start": meter.start, "on_cell_executed": meter.done}
    km = _kernel_manager()
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", km=km, allow_errors=allow_errors,
        resources={"metadata": {"path": str(lesson.path.parent)}}, **hooks,
    )
    try:
        client.execute(env=kernel_env())
    except CellExecutionError:
        pass
    except Exception as exc:  # kernel died, timeout, or nbclient lost its kernel client
        return nb, exc
    finally:
        if progress:
            meter.close()
        if km.has_kernel:  # a kernel manager passed in is ours to shut down, not nbclient's
            try:
                km.shutdown_kernel(now=True)
            except Exception:
                pass
        if km.transport == "ipc":
            shutil.rmtree(Path(km.ip).parent, ignore_errors=True)
    return nb, None


def describe(exc: Exception) -> str:
    """``Name: first line`` of a failure of the notebook machinery."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"


def _exercise_problem(found: list[tuple[str, str]], solved: bool) -> str | None:
    """Why the exercise verdicts are wrong for the form, or None when they are as expected."""
    expected = ("right",) if solved else ("wrong", "not yet")
    bad = [f"{ex} printed {v}" for ex, v in found if v not in expected]
    if not bad:
        return None
    if solved:
        return "exercise cells should print right: " + ", ".join(bad)
    hint = ("; a learner's copy? `hisparse-numba lessons check --dir DIR` shows its progress"
            if any(v == "right" for _, v in found) else "")
    return "exercise cells should print wrong:/not yet: (a shipped lesson is unsolved): " + ", ".join(bad) + hint


def _use_own_kernelspec() -> None:
    paths = os.environ.get("JUPYTER_PATH", "")
    if _kernel_dir() not in paths.split(os.pathsep):
        os.environ["JUPYTER_PATH"] = _kernel_dir() + os.pathsep + paths


def execute(lesson: Lesson, timeout: int = 600, solved: bool = False, progress: bool = True,
            allow_errors: bool = False):
    """``(executed notebook, failure or None, note)``. When the notebook machinery itself fails (a
    dead kernel, or nbclient's bare ``AssertionError`` when it loses its kernel client, seen on
    busy machines), the lesson runs once more in a new kernel and ``note`` says so; a cell
    timeout is not retried."""
    from nbclient.exceptions import CellTimeoutError

    kwargs = {"allow_errors": True} if allow_errors else {}
    nb, failure = _execute(lesson, timeout, solved, progress, **kwargs)
    note = ""
    if failure is not None and not isinstance(failure, CellTimeoutError):
        note = f" (second kernel; the first failed: {describe(failure)})"
        nb, failure = _execute(lesson, timeout, solved, progress, **kwargs)
    return nb, failure, note


def run_lesson(lesson: Lesson, out_dir: Path, timeout: int = 600, solved: bool = False,
               progress: bool = True) -> LessonResult:
    """Run one lesson in one form (see :func:`execute`); save the executed copy and its HTML."""
    from .. import device

    form = "solved" if solved else "shipped"
    t0 = time.perf_counter()
    nb, failure, note = execute(lesson, timeout, solved, progress)
    seconds = time.perf_counter() - t0
    ok, detail = failure is None, "" if failure is None else describe(failure)
    found = sol.verdicts(nb)
    if ok:
        err = first_error(nb)
        missing = _unraised(nb)
        wrong_verdicts = _exercise_problem(found, solved)
        if err is not None:
            ok, detail = False, f"cell {err[0]}: {err[1]}"
        elif missing is not None:
            ok, detail = False, f"cell {missing} is tagged {RAISES_TAG} but did not raise"
        elif wrong_verdicts is not None:
            ok, detail = False, wrong_verdicts
    _save(nb, lesson, out_dir / SOLVED_SUBDIR if solved else out_dir)
    return LessonResult(lesson, device.backend(), seconds, ok, detail + note, form, found)


def _save(nb, lesson: Lesson, out_dir: Path) -> None:
    import nbformat

    out_dir.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out_dir / lesson.path.name)
    try:
        from nbconvert import HTMLExporter

        html, _ = HTMLExporter().from_notebook_node(nb)
        (out_dir / lesson.path.with_suffix(".html").name).write_text(html)
    except Exception as exc:  # HTML is a convenience; the executed notebook is the record
        print(f"     (no HTML for {lesson.path.name}: {type(exc).__name__}: {exc})", file=sys.stderr)


def run(ids=(), lessons_dir=None, out_dir="build/lessons", timeout: int = 600,
        solved: bool = False) -> int:
    lessons = select(discover(lessons_dir), ids)
    if not lessons:
        print(f"no lesson notebooks in {lessons_dir or default_lessons_dir()}", flush=True)
        return 1
    form = "solved (exercise cells replaced by lessons/solutions/NN.py)" if solved else \
        "shipped (exercise cells as the learner gets them)"
    print(f"running {len(lessons)} lesson(s), {form}; executed copies in {out_dir}", flush=True)
    results = []
    for lesson in lessons:
        try:
            result = run_lesson(lesson, Path(out_dir), timeout, solved)
        except (FileNotFoundError, sol.SolutionsFileError) as exc:  # a missing or mismatched solutions file
            result = LessonResult(lesson, "-", 0.0, False, str(exc), "solved" if solved else "shipped")
        print(result.line(), flush=True)
        results.append(result)
    print(summary(results, solved), flush=True)
    return 1 if any(not r.ok for r in results) else 0


def summary(results: list[LessonResult], solved: bool) -> str:
    """The last line of ``lessons run``: notebooks run as expected, and exercises right of all."""
    failed = sum(not r.ok for r in results)
    verdicts = [v for r in results for _, v in r.verdicts]
    right = sum(v == "right" for v in verdicts)
    line = (f"notebooks: {len(results) - failed} of {len(results)} ran as expected, {failed} failed; "
            f"exercises right: {right}/{len(verdicts)}")
    return line + (" (the shipped form leaves every exercise to the learner)" if not solved and not right else "")
