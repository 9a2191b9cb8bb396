"""pyproject.toml and the conda files pin the same things; the README names what CI runs; a real
wheel carries the lessons."""

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import yaml

from .conftest import skip_when_the_index_is_unreachable

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"cupy-cuda12x": "cupy", "cupy-cuda13x": "cupy"}


def _split(req: str):
    m = re.match(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*?)\s*(;.*)?$", req)
    return m.group(1).lower(), m.group(3).replace(" ", "")


CONDA_FILES = {"environment.yml": None, "environment-cuda12.yml": "cuda12", "environment-cuda13.yml": "cuda13"}


def _pyproject(gpu_extra=None):
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(data["dependencies"])
    for extra in ("lessons", "test") + ((gpu_extra,) if gpu_extra else ()):
        reqs += data["optional-dependencies"][extra]
    pins = {}
    for r in reqs:
        if "python_version" in r:
            continue
        name, spec = _split(r)
        pins[CONDA_NAMES.get(name, name)] = spec
    return data, pins


def _environment(filename="environment.yml"):
    env = yaml.safe_load((ROOT / filename).read_text())
    pins = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for r in dep["pip"]:
                if not r.startswith("-e"):
                    name, spec = _split(r)
                    pins[name] = spec
        else:
            name, spec = _split(dep.replace(" ", ""))
            pins[name] = spec
    return env, pins


@pytest.mark.parametrize("filename", list(CONDA_FILES))
def test_environment_matches_pyproject(filename):
    data, py = _pyproject(CONDA_FILES[filename])
    env, conda = _environment(filename)
    assert "conda-forge" in env["channels"]
    assert conda["python"] == data["requires-python"]
    for name, spec in py.items():
        assert name in conda, f"{name} is in pyproject.toml but not in {filename}"
        assert conda[name] == spec, f"{name}: pyproject {spec!r} vs {filename} {conda[name]!r}"


@pytest.mark.parametrize("major", ["12", "13"])
def test_conda_gpu_variant_pins_its_cuda_major(major):
    text = (ROOT / f"environment-cuda{major}.yml").read_text()
    assert f"cuda-version={major}" in text and f"numba-cuda[cu{major}]" in text
    other = "13" if major == "12" else "12"
    assert f"cu{other}" not in text


def test_the_cpu_conda_file_downloads_no_cuda_toolkit():
    env, _ = _environment()
    flat = str(env["dependencies"])
    assert "cu12" not in flat and "cu13" not in flat and "cupy" not in flat


def test_numpy_pin_excludes_2_5_and_numba_cuda_is_0_30():
    _, py = _pyproject()
    assert "<2.5" in py["numpy"] and ">=2" in py["numpy"]
    assert py["numba-cuda"] == ">=0.30,<0.31"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lessons" in readme
    assert re.search(r"^make test PTX=1$", ci, re.M)


def test_make_test_installs_nvvm_only_when_asked():
    def install_line(*args):
        # under `make test PTX=1` (CI) make exports PTX to this process: a clean environment
        env = {k: v for k, v in os.environ.items() if k not in ("PTX", "CUDA", "MAKEFLAGS", "MFLAGS",
                                                               "MAKEOVERRIDES", "MAKELEVEL")}
        out = subprocess.run(["make", "-n", "-B", "test", *args], cwd=ROOT, capture_output=True, text=True,
                             env=env)
        assert out.returncode == 0, out.stderr
        return next(l for l in out.stdout.splitlines() if "pip_progress.py" in l and '-e ".[' in l)

    if shutil.which("make") is None:
        pytest.fail("make is not installed; the README's commands need it")
    assert '".[test]"' in install_line()
    assert '".[test,ptx]"' in install_line("PTX=1")
    assert '".[test,cuda12]"' in install_line("CUDA=12", "PTX=1")


def test_the_repository_url_is_defined_once():
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Repository"].startswith("https://github.com/")
    from hisparse_numba.lessons import colab
    assert colab.repository_url(ROOT) == urls["Repository"]
    for path in (ROOT / "hisparse_numba").rglob("*.py"):
        assert urls["Repository"] not in path.read_text(), f"{path} repeats the repository URL"


def _tracked_copy(dest: Path) -> Path:
    """The files git tracks (and untracked, unignored ones), copied to ``dest``: a clean build tree."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    for name in listed:
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def _build_wheel(tmp_path: Path) -> Path:
    """``pip wheel --no-deps`` of a clean copy of the checkout."""
    src = _tracked_copy(tmp_path / "src")
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                          str(src)], capture_output=True, text=True, timeout=900)
    skip_when_the_index_is_unreachable(out)                 # setuptools for the isolated build
    assert out.returncode == 0, out.stdout + out.stderr
    return next((tmp_path / "dist").glob("hisparse_numba-*.whl"))


@pytest.mark.slow
def test_a_real_wheel_carries_the_lessons(tmp_path):
    """pip wheel --no-deps on a clean copy, then ``lessons list`` from the unpacked wheel, away from
    any lessons/ folder, finds every lesson (and the solutions travel with them)."""
    wheel = _build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    lessons = sorted(p.name for p in (ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))
    packaged = sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("hisparse_numba/lessons/notebooks/")
                      and n.endswith(".ipynb"))
    assert packaged == lessons
    solutions = sorted(p.name for p in (ROOT / "lessons" / "solutions").glob("*.py"))
    assert sorted(n.rsplit("/", 1)[1] for n in names
                  if n.startswith("hisparse_numba/lessons/notebooks/solutions/")) == solutions
    assert not any("ipynb_checkpoints" in n for n in names)

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the wheel's files first; whatever else the path holds (the GPU machine's numpy<2.5) after them
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                 if p and Path(p).resolve() != ROOT]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site)] + inherited))
    listed = subprocess.run([sys.executable, "-m", "hisparse_numba", "lessons", "list"], cwd=elsewhere, env=env,
                            capture_output=True, text=True, timeout=600)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    ids = [line.split()[0] for line in listed.stdout.splitlines() if re.match(r"^\d\d  ", line)]
    assert ids == [name[:2] for name in lessons]


def _in_venv(venv: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    """``hisparse-numba ARGS`` run by the fresh venv, away from the checkout (no PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "HISPARSE_NUMBA_BACKEND", "NUMBA_ENABLE_CUDASIM", "VIRTUAL_ENV")}
    return subprocess.run([str(venv / "bin" / "hisparse-numba"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow(seconds=90)
def test_a_plain_pip_install_lists_explains_and_names_the_lessons_extra(tmp_path):
    """The wheel installed WITHOUT extras into a fresh venv (its own site-packages: numpy, numba and
    numba-cuda come from the package index or pip's cache): listing, doctor, explain and copy work;
    a command that needs the lessons extra says so in one line, exit status 2, no traceback."""
    wheel = _build_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                         capture_output=True, text=True, timeout=900)
    skip_when_the_index_is_unreachable(pip)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    for module in ("nbformat", "nbclient", "ipykernel", "matplotlib"):
        found = subprocess.run([str(venv / "bin" / "python"), "-c", f"import {module}"], capture_output=True)
        assert found.returncode != 0, f"{module} is importable: the venv is not bare"
    away = tmp_path / "away"
    away.mkdir()

    listed = _in_venv(venv, "lessons", "list", cwd=away)
    lessons = sorted(p.name[:2] for p in (ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert [l.split()[0] for l in listed.stdout.splitlines() if re.match(r"^\d\d  ", l)] == lessons

    doctor = _in_venv(venv, "doctor", cwd=away)
    assert doctor.returncode == 0 and "backend       simulator" in doctor.stdout, doctor.stdout + doctor.stderr
    assert "PTX compile" in doctor.stdout and "Traceback" not in doctor.stderr

    explained = _in_venv(venv, "explain", "ValueError: hot_buffer_size (64) must be >= num_top_k (128)", cwd=away)
    assert explained.returncode == 0 and "lesson: 09" in explained.stdout, explained.stdout + explained.stderr

    copied = _in_venv(venv, "lessons", "copy", str(away / "mine"), cwd=away)
    assert copied.returncode == 0 and len(list((away / "mine").glob("*.ipynb"))) == len(lessons), copied.stderr

    for args, action in ((("lessons", "run", "00"), "lessons run"),
                         (("lessons", "colab-cell", str(away / "mine")), "lessons colab-cell")):
        refused = _in_venv(venv, *args, cwd=away)
        assert refused.returncode == 2 and refused.stdout == "", refused.stdout + refused.stderr
        line = refused.stderr.strip()
        assert "\n" not in line and "Traceback" not in line, line
        assert line.startswith(f"hisparse-numba: error: {action} needs the lessons extra (nbformat")
        assert line.endswith(": pip install 'hisparse-numba[lessons]'"), line


@pytest.mark.parametrize("argv, missing", [(["lessons", "run", "00"], "nbclient, ipykernel"),
                                           (["lessons", "colab-cell", "lessons"], "nbformat")])
def test_without_the_lessons_extra_a_command_says_so_in_one_line(monkeypatch, capsys, argv, missing):
    import importlib.util

    from hisparse_numba import cli

    real = importlib.util.find_spec
    gone = set(missing.split(", "))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in gone else real(name, *a))
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err == (f"hisparse-numba: error: {' '.join(argv[:2])} needs the lessons extra ({missing} not "
                   "installed): pip install 'hisparse-numba[lessons]'\n")
