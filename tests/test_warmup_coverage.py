"""``warmup --lessons`` compiles every kernel specialisation the lessons launch.

The solved lessons run headless (as ``make lessons`` runs them) with every ``device.launch`` of the
notebook's process recorded (an IPython startup file enters ``warmup.recording_launches``); the
warmup tasks run under the same recorder here. Every specialisation of a hisparse-numba kernel that
a lesson launches must be one a warmup task launches. Kernels the learner writes (lesson 14's
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


def record_lessons(tmp_path, lessons) -> dict:
    """``{lesson id: set of specialisations}`` of the solved lessons, run headless."""
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-record-launches.py").write_text(STARTUP)
    found = {}
    saved = {k: os.environ.get(k) for k in ("IPYTHONDIR", "HISPARSE_NUMBA_LAUNCH_LOG")}
    os.environ["IPYTHONDIR"] = str(tmp_path / "ipython")
    try:
        for lesson in lessons:
            log = tmp_path / f"launches-{lesson.id}.txt"
            log.touch()
            os.environ["HISPARSE_NUMBA_LAUNCH_LOG"] = str(log)
            result = runner.run_lesson(lesson, tmp_path / "out", solved=True, progress=False)
            assert result.ok, result.line()
            found[lesson.id] = set(log.read_text().splitlines())
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return found


def warmup_launches(which: str) -> set:
    seen = set()
    with warmup.recording_launches(seen):
        for task in warmup.tasks_for(which):
            task.run()
    return seen


@pytest.mark.slow
def test_warmup_covers_every_kernel_the_lessons_launch(tmp_path):
    lessons = runner.discover(LESSONS_DIR)
    by_lesson = record_lessons(tmp_path, lessons)
    assert any(by_lesson.values()), "the recorder saw no launch: is the IPython startup file read?"
    covered = warmup_launches("lessons")
    assert not any(k.startswith(warmup.LEARNER_MARK) for k in covered)
    missing = {lid: sorted(k for k in keys - covered if not k.startswith(warmup.LEARNER_MARK))
               for lid, keys in by_lesson.items()}
    missing = {lid: keys for lid, keys in missing.items() if keys}
    assert not missing, "lessons launch specialisations warmup --lessons does not compile:\n" + "\n".join(
        f"lesson {lid}: {k}" for lid, keys in sorted(missing.items()) for k in keys)
