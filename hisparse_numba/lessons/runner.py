"""Run the lesson notebooks headless with nbclient and report one line per lesson.

A lesson is ``lessons/NN-name.ipynb``; its id is ``NN`` and its title the first Markdown
heading. Cells run top to bottom in a fresh kernel of *this* Python (so the lesson sees the
same hisparse-numba and the same backend). A cell tagged ``raises-exception`` must raise (it
reproduces the lesson's error); an error anywhere else fails the lesson. Executed copies and
HTML renderings go to ``build/lessons/``.
"""

from __future__ import annotations

import json
import re
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RAISES_TAG = "raises-exception"


@dataclass
class Lesson:
    id: str
    title: str
    path: Path


@dataclass
class LessonResult:
    lesson: Lesson
    backend: str
    seconds: float
    ok: bool
    detail: str = ""

    def line(self) -> str:
        status = f"ok{self.detail}" if self.ok else f"FAILED {self.detail}"
        return f"{self.lesson.id:>3}  {self.lesson.title[:52]:<52}  {self.backend:<9}  {self.seconds:6.1f}s  {status}"


def default_lessons_dir() -> Path:
    """``./lessons`` when it exists, else the ``lessons`` folder of the source checkout."""
    here = Path.cwd() / "lessons"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "lessons"


def notebook_title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return re.sub(r"^\d+\s*[·.:-]\s*", "", line.lstrip("#").strip())
    return "(untitled)"


def discover(lessons_dir: Path | None = None) -> list[Lesson]:
    import nbformat

    lessons_dir = Path(lessons_dir or default_lessons_dir())
    lessons = []
    for path in sorted(lessons_dir.glob("[0-9][0-9]-*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        lessons.append(Lesson(path.name.split("-", 1)[0], notebook_title(nb), path))
    return lessons


def select(lessons: list[Lesson], ids) -> list[Lesson]:
    if not ids:
        return lessons
    wanted = {str(i).zfill(2) for i in ids}
    unknown = wanted - {l.id for l in lessons}
    if unknown:
        raise SystemExit(f"no lesson with id {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(l.id for l in lessons)}")
    return [l for l in lessons if l.id in wanted]


def _kernel_dir() -> str:
    """A Jupyter data dir whose ``python3`` kernel is this very interpreter."""
    root = tempfile.mkdtemp(prefix="hisparse-kernel-")
    spec_dir = Path(root, "kernels", "python3")
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (hisparse-numba)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return root


def _first_error(nb):
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
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


def _execute(lesson: Lesson, timeout: int):
    """Run the notebook in a fresh kernel: (executed notebook, failure of the machinery or None).

    A cell's own error is not a failure here; it stays in the outputs for ``_first_error``."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(lesson.path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3",
        resources={"metadata": {"path": str(lesson.path.parent)}},
    )
    try:
        client.execute()
    except CellExecutionError:
        pass
    except Exception as exc:  # kernel died, timeout, or nbclient lost its kernel client
        return nb, exc
    return nb, None


def _describe(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"


def run_lesson(lesson: Lesson, out_dir: Path, timeout: int = 600) -> LessonResult:
    """Run one lesson. When the notebook machinery itself fails (a dead kernel, or nbclient's
    bare ``AssertionError`` when it loses its kernel client, seen on busy machines), the lesson
    runs once more in a new kernel and the line says so; a cell timeout is not retried."""
    from nbclient.exceptions import CellTimeoutError

    from .. import device

    os.environ["JUPYTER_PATH"] = _kernel_dir() + os.pathsep + os.environ.get("JUPYTER_PATH", "")
    os.environ.setdefault("MPLBACKEND", "Agg")
    t0 = time.perf_counter()
    nb, failure = _execute(lesson, timeout)
    note = ""
    if failure is not None and not isinstance(failure, CellTimeoutError):
        note = f" (second kernel; the first failed: {_describe(failure)})"
        nb, failure = _execute(lesson, timeout)
    seconds = time.perf_counter() - t0
    ok, detail = failure is None, "" if failure is None else _describe(failure)
    if ok:
        err = _first_error(nb)
        missing = _unraised(nb)
        if err is not None:
            ok, detail = False, f"cell {err[0]}: {err[1]}"
        elif missing is not None:
            ok, detail = False, f"cell {missing} is tagged {RAISES_TAG} but did not raise"
    _save(nb, lesson, out_dir)
    return LessonResult(lesson, device.backend(), seconds, ok, detail + note)


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


def run(ids=(), lessons_dir=None, out_dir="build/lessons", timeout: int = 600) -> int:
    lessons = select(discover(lessons_dir), ids)
    results = []
    for lesson in lessons:
        result = run_lesson(lesson, Path(out_dir), timeout)
        print(result.line(), flush=True)
        results.append(result)
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed", flush=True)
    return 1 if failed or not results else 0
