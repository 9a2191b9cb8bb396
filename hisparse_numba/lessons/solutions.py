"""Exercise cells, their solutions, and the verdicts the checkers print.

An exercise cell carries the metadata ``{"tags": ["exercise"], "exercise": "01-a"}``. As shipped
it holds a stub and the checker call; the solved cell lives in ``lessons/solutions/01.py``, one
section per exercise, each opened by a line ``# exercise: 01-a``. :func:`solve` puts the
sections in place of the stubs (``hisparse-numba lessons run --solved``). A checker prints one
line starting with ``right``, ``wrong:`` or ``not yet:``; :func:`verdicts` reads them back from
an executed notebook.
"""

from __future__ import annotations

import re
from pathlib import Path

EXERCISE_TAG = "exercise"
SECTION = re.compile(r"^# exercise:\s*(\S+)\s*$", re.M)
VERDICT = re.compile(r"^(right|wrong:|not yet:)", re.M)


class SolutionsFileError(Exception):
    """A solutions file that does not fit its notebook (a project bug, not a learner's error)."""


def solutions_path(lessons_dir: Path, lesson_id: str) -> Path:
    return Path(lessons_dir) / "solutions" / f"{lesson_id}.py"


def read_sections(path: Path) -> dict[str, str]:
    """``{exercise id: solved cell source}`` of one solutions file."""
    text = Path(path).read_text()
    marks = list(SECTION.finditer(text))
    sections = {}
    for mark, nxt in zip(marks, marks[1:] + [None]):
        ex = mark.group(1)
        if ex in sections:
            raise SolutionsFileError(f"{path}: exercise {ex} has two sections")
        sections[ex] = text[mark.end():nxt.start() if nxt else len(text)].strip("\n")
    return sections


def exercise_cells(nb) -> list[tuple[int, str]]:
    """``(cell index, exercise id)`` of every exercise cell, in notebook order."""
    found = []
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {})
        if cell.cell_type == "code" and EXERCISE_TAG in meta.get("tags", []):
            found.append((index, str(meta.get("exercise", f"cell {index}"))))
    return found


def solve(nb, sections: dict[str, str], name: str = "notebook") -> None:
    """Replace each exercise cell's source by its section, in place; every id must match both ways."""
    cells = exercise_cells(nb)
    ids = [ex for _, ex in cells]
    missing = [ex for ex in ids if ex not in sections]
    extra = [ex for ex in sections if ex not in ids]
    if missing or extra:
        raise SolutionsFileError(f"{name}: solutions do not match the exercise cells "
                         f"(no section for {missing or 'none'}; no cell for {extra or 'none'})")
    for index, ex in cells:
        nb.cells[index].source = sections[ex]


def cell_text(cell) -> str:
    """Everything a code cell printed (stdout, stderr, text results)."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)    # a figure's text/plain has no newline of its own


def verdict(cell) -> str:
    """``right``, ``wrong``, ``not yet``, ``error`` (the cell raised) or ``none`` (nothing printed)."""
    if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
        return "error"
    found = VERDICT.findall(cell_text(cell))
    if not found:
        return "none"
    return found[-1].rstrip(":")


def verdicts(nb) -> list[tuple[str, str]]:
    """``(exercise id, verdict)`` of every exercise cell of an executed notebook."""
    return [(ex, verdict(nb.cells[index])) for index, ex in exercise_cells(nb)]
