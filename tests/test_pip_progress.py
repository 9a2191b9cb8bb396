"""make's installs print one line a phase, keep pip's whole output in a log and fail with pip's
status and its last lines (scripts/pip_progress.py)."""

import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "pip_progress.py"

# the shape of pip 25's output for `pip install -e ".[lessons]"` into an empty venv, shortened
PIP_OUTPUT = """\
Looking in indexes: https://pypi.org/simple
Obtaining file:///home/me/hisparse-numba
  Installing build dependencies: started
  Installing build dependencies: finished with status 'done'
Collecting numba>=0.61 (from hisparse-numba==0.1.0)
  Downloading numba-0.68.1-cp311-cp311-manylinux_2_28_x86_64.whl (3.8 MB)
     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 3.8/3.8 MB 106.6 MB/s  0:00:00
Collecting numba-cuda<0.31,>=0.30 (from hisparse-numba==0.1.0)
  Downloading numba_cuda-0.30.4-cp311-cp311-manylinux_2_28_x86_64.whl (1.9 MB)
Processing /opt/files/numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl (from hisparse-numba==0.1.0)
Requirement already satisfied: packaging in ./venv/lib/python3.11/site-packages (from numba-cuda)
Building wheels for collected packages: hisparse-numba
  Building editable for hisparse-numba (pyproject.toml): started
  Created wheel for hisparse-numba: filename=hisparse_numba-0.1.0-0.editable-py3-none-any.whl size=10066
Successfully built hisparse-numba
Installing collected packages: numpy, numba, numba-cuda, hisparse-numba
Successfully installed hisparse-numba-0.1.0 numba-0.68.1 numba-cuda-0.30.4 numpy-2.4.6
"""


def _module():
    spec = importlib.util.spec_from_file_location("pip_progress", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class _Log(io.StringIO):
    def isatty(self):
        return False


def test_a_log_gets_one_line_a_phase():
    out = _Log()
    progress = _module().Progress(out)
    for line in PIP_OUTPUT.splitlines(keepends=True):
        progress.feed(line)
    progress.finish(0)
    lines = [line.rsplit(" (", 1)[0] for line in out.getvalue().splitlines()]
    assert lines == ["pip: preparing: hisparse-numba",
                     "pip: collecting 1 packages (0 downloads): numba>=0.61",
                     "pip: building: hisparse-numba",
                     "pip: installing 4 packages",
                     "pip: installed 4 packages"]


def test_a_terminal_gets_one_line_rewritten_per_phase():
    class Tty(_Log):
        def isatty(self):
            return True
    out = Tty()
    progress = _module().Progress(out)
    for line in PIP_OUTPUT.splitlines(keepends=True):
        progress.feed(line)
    progress.finish(0)
    shown = out.getvalue().split("\n")   # what stays on screen: each line's last rewrite
    assert shown[-1] == "" and all(line.startswith("\r\x1b[K") for line in shown[:-1])
    kept = [line.rsplit("\r\x1b[K", 1)[-1].rsplit(" (", 1)[0] for line in shown[:-1]]
    assert kept == ["pip: preparing: hisparse-numba",
                    "pip: collecting 4 packages (2 downloads): packaging",
                    "pip: building: hisparse-numba",
                    "pip: installing 4 packages", "pip: installed 4 packages"]


def _run(tmp_path, *pip_args):
    log = tmp_path / "pip.log"
    out = subprocess.run([sys.executable, str(SCRIPT), "--log", str(log), *pip_args], capture_output=True,
                         text=True, timeout=300)
    return out, log.read_text()


def test_nothing_to_install_is_one_line_and_the_log_has_pip_s_output(tmp_path):
    out, log = _run(tmp_path, "--no-index", "pytest")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("pip: collecting 1 packages (0 downloads): pytest")
    assert re.search(r"^pip: nothing to install \(\d+ packages already satisfied\)", out.stdout, re.M)
    assert len(out.stdout.splitlines()) == 2 and "Requirement already satisfied: pytest" in log


def test_a_failing_pip_gives_its_status_and_last_lines(tmp_path):
    out, log = _run(tmp_path, "--no-index", "no-such-package-hisparse-zzz")
    assert out.returncode == 1
    assert "pip install failed (exit status 1); its last lines" in out.stderr and str(tmp_path) in out.stderr
    assert "no-such-package-hisparse-zzz" in out.stderr and "no-such-package-hisparse-zzz" in log
