"""A learner's progress: their copy of the lessons, run as it is, one verdict per exercise.

``hisparse-numba lessons check --dir my-lessons`` runs each notebook of the folder top to bottom in
a fresh kernel (every cell, even after one that raised, so that every exercise gets its verdict)
and prints one line per exercise::

    09-a  right    the misses take slots [0, 1, 3, 5] and lru_slots becomes [0, 1, 3, 5, 2, 4]
    11-a  wrong    copied: that is one direction; ...
    12-a  not yet  replace ... with a number of entries

then ``exercises right: N/M``. The verdict is what the exercise cell's checker printed
(``right``, ``wrong:``, ``not yet:``); an exercise cell that raised is ``wrong`` (its error is the
message), one that printed no verdict is ``not yet``. Nothing is written into the folder.

``--report FILE`` writes the same as one JSON object, for an instructor to collect::

    {"learner": "ada", "checked_at": "2025-01-31T10:02:03+00:00", "backend": "simulator",
     "right": 1, "total": 3,
     "lessons": [{"id": "09", "title": "...", "seconds": 5.2, "ran": true, "problem": ""}, ...],
     "exercises": [{"id": "09-a", "lesson": "09", "verdict": "right", "message": "..."}, ...]}

``problem`` is empty, or names what kept the lesson from running cleanly: a cell outside the
exercises that raised, or (``ran`` false) a kernel that died or a cell that timed out. The
command exits with 1 when a lesson did not run, else 0 (wrong answers are progress, not failure).
"""

from __future__ import annotations

import datetime
import getpass
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import runner
from . import solutions as sol

VERDICT_WORDS = ("right", "wrong", "not yet")


@dataclass
class ExerciseVerdict:
    id: str
    lesson: str
    verdict: str          # one of VERDICT_WORDS
    message: str

    def line(self) -> str:
        return f"{self.id}  {self.verdict:<7}  {runner.fit(self.message, 100)}".rstrip()


@dataclass
class LessonProgress:
    id: str
    title: str
    seconds: float
    problem: str
    exercises: list
    ran: bool = True      # False: the kernel died or a cell timed out


def exercise_verdict(cell, exercise: str, lesson: str) -> ExerciseVerdict:
    """The verdict of one executed exercise cell, with the checker's own words as its message."""
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        return ExerciseVerdict(exercise, lesson, "wrong", f"the cell raised {errors[0].get('ename')}: "
                                                          f"{errors[0].get('evalue')}")
    lines = [line for line in sol.cell_text(cell).splitlines() if sol.VERDICT.match(line)]
    if not lines:
        return ExerciseVerdict(exercise, lesson, "not yet", "the cell printed no verdict (is the checker "
                                                            "call still at its end?)")
    match = sol.VERDICT.match(lines[-1])
    return ExerciseVerdict(exercise, lesson, match.group(1).rstrip(":"), lines[-1][match.end():].lstrip(": "))


def check_lesson(lesson: runner.Lesson, timeout: int = 600) -> LessonProgress:
    """Run ``lesson`` as it is (exercise cells untouched) and read each exercise's verdict."""
    t0 = time.perf_counter()
    nb, failure, note = runner.execute(lesson, timeout, allow_errors=True)
    seconds = time.perf_counter() - t0
    cells = dict(sol.exercise_cells(nb))
    exercises = [exercise_verdict(nb.cells[index], ex, lesson.id) for index, ex in cells.items()]
    error = runner.first_error(nb, skip=cells)
    problem = ""
    if failure is not None:
        problem = runner.describe(failure)
    elif error is not None:
        problem = f"cell {error[0]} raised {error[1]}"
    return LessonProgress(lesson.id, lesson.title, seconds, problem + note, exercises, failure is None)


def report(lessons: list[LessonProgress], learner: str, backend: str) -> dict:
    """The JSON object ``--report`` writes (see the module docstring)."""
    exercises = [ex for lesson in lessons for ex in lesson.exercises]
    return {
        "learner": learner,
        "checked_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "backend": backend,
        "right": sum(ex.verdict == "right" for ex in exercises),
        "total": len(exercises),
        "lessons": [{"id": l.id, "title": l.title, "seconds": round(l.seconds, 1), "ran": l.ran,
                     "problem": l.problem} for l in lessons],
        "exercises": [asdict(ex) for ex in exercises],
    }


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):          # a container user with no name
        return "learner"


def check(ids=(), lessons_dir=None, timeout: int = 600, report_path=None, learner: str | None = None) -> int:
    """``hisparse-numba lessons check``: print each exercise's verdict and the count right; write
    the JSON report when ``report_path`` is given. 0 when every notebook ran, else 1."""
    from .. import device

    folder = Path(lessons_dir or runner.default_lessons_dir())
    lessons = runner.select(runner.discover(folder), ids)
    if not lessons:
        print(f"no lesson notebooks in {folder}", flush=True)
        return 1
    print(f"checking {len(lessons)} lesson(s) in {folder}, as they are (nothing is written there)", flush=True)
    done = []
    for lesson in lessons:
        progress = check_lesson(lesson, timeout)
        for ex in progress.exercises:
            print(ex.line(), flush=True)
        if progress.problem:
            print(f"      lesson {lesson.id}: {progress.problem}", flush=True)
        done.append(progress)
    data = report(done, learner or _user_name(), device.backend())
    print(f"exercises right: {data['right']}/{data['total']}", flush=True)
    if report_path is not None:
        Path(report_path).write_text(json.dumps(data, indent=1) + "\n")
        print(f"report for {data['learner']} written to {report_path}", flush=True)
    return 0 if all(p.ran for p in done) else 1
