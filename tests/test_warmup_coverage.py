"""``warmup --lessons`` compiles every kernel specialisation the lessons launch.

Each solved lesson runs headless (as ``make lessons`` runs it; one test per lesson, so that
pytest-xdist spreads them) with every ``device.launch`` of the notebook's process recorded (an
IPython startup file enters ``warmup.recording_launches``); the warmup tasks run under the same
recorder here, once per test process. Every specialisation of a hisparse-numba kernel that
a lesson launches must be one a warmup task launches. Kernels the learner writes (lessons 14 and 15's
puzzles) cannot be known in advance and are left out. The same holds in both worlds: in the
simulator the speculative swap-in's geometry is the simulator's, on a GPU the GPU's.
"""

import os
from pathlib import Path

import pytest

from hisparse_numba import warmup
from hisparse_numba.lessons import runner

LESSONS_DIR = Path(__file__).resolve().parents[1] / "lessons"

STARTUP = """\
import os
from hisparse_numba import warmup as _warmup
_hisparse_launch_recorder = _warmup.recording_launches(log_path=os.environ["HISPARSE_NUMBA_LAUNCH_LOG"])
_hisparse_launch_recorder.__enter__()   # kept referenced: a collected generator would undo the patch
"""


def record_lesson(tmp_path, lesson) -> set:
    """The specialisations the solved ``lesson`` launches, run headless."""
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-record-launches.py").write_text(STARTUP)
    log = tmp_path / f"launches-{lesson.id}.txt"
    log.touch()
    saved = {k: os.environ.get(k) for k in ("IPYTHONDIR", "HISPARSE_NUMBA_LAUNCH_LOG")}
    os.environ.update(IPYTHONDIR=str(tmp_path / "ipython"), HISPARSE_NUMBA_LAUNCH_LOG=str(log))
    try:
        result = runner.run_lesson(lesson, tmp_path / "out", solved=True, progress=False)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert result.ok, result.line()
    return set(log.read_text().splitlines())


@pytest.fixture(scope="session")
def warmed_up() -> dict:
    """What each ``warmup --lessons`` task launches, by task label (once per test process:
    session-scoped, because the suite's order puts other modules' tests between these, see
    ``longest_first``)."""
    seen = {}
    for task in warmup.tasks_for("lessons"):
        seen[task.label] = set()
        with warmup.recording_launches(seen[task.label]):
            task.run()
    assert not any(k.startswith(warmup.LEARNER_MARK) for keys in seen.values() for k in keys)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("lesson", runner.discover(LESSONS_DIR), ids=lambda lesson: lesson.id)
def test_warmup_covers_every_kernel_the_lesson_launches(tmp_path, lesson, warmed_up):
    """Within the tasks that name the lesson (``Task.lessons``): the lessons flow starts a lesson
    once those are compiled, so what they miss would compile inside the lesson."""
    launched = record_lesson(tmp_path, lesson)
    own = set().union(*(warmed_up[t.label] for t in warmup.tasks_of_lesson(lesson.id)))
    missing = sorted(k for k in launched - own if not k.startswith(warmup.LEARNER_MARK))
    assert not missing, (f"lesson {lesson.id} launches specialisations that the warmup tasks naming "
                         "it do not compile:\n" + "\n".join(missing))


def test_the_recorder_sees_a_lesson_launch(tmp_path):
    """The IPython startup file is read: lesson 00 (a quick one) launches at least one kernel."""
    lesson = next(l for l in runner.discover(LESSONS_DIR) if l.id == "00")
    assert record_lesson(tmp_path, lesson), "the recorder saw no launch: is the IPython startup file read?"
