"""The zero-install and classroom routes: Binder (binder/), the workshop hub (deploy/hub/) and the
scripts that try them for real (scripts/hub_smoke_test.py, scripts/browser_test.py)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import skip_when_the_index_is_unreachable

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
HUB = ROOT / "deploy" / "hub"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Wheels that carry a CUDA toolkit or need a GPU: none of them belongs on a CPU-only Binder.
CUDA_WHEELS = re.compile(r"^(nvidia-|cupy|cuda-toolkit|nvidia_)", re.IGNORECASE)


def requirement_name(line: str) -> str:
    return re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0].lower()


def binder_requirements() -> list[str]:
    lines = (BINDER / "requirements.txt").read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.lstrip().startswith("#")]


# ---------------------------------------------------------------------------- Binder

def test_binder_installs_the_package_pins_and_the_lessons_extra_only():
    wanted = PYPROJECT["project"]["dependencies"] + PYPROJECT["project"]["optional-dependencies"]["lessons"]
    assert sorted(binder_requirements()) == sorted(wanted)
    for line in binder_requirements():
        assert "[" not in line, f"{line}: an extra would pull CUDA wheels"
        assert not CUDA_WHEELS.match(requirement_name(line)), line


def test_binder_scripts_register_the_simulator_kernel_and_set_the_backend():
    for name in ("postBuild", "start"):
        path = BINDER / name
        assert path.stat().st_mode & stat.S_IXUSR, f"binder/{name} must be executable"
        subprocess.run(["bash", "-n", str(path)], check=True)
    post_build = (BINDER / "postBuild").read_text()
    assert re.search(r"pip install .*-e \"\.\[lessons\]\"", post_build)
    assert re.search(r"ipykernel install .*--name hisparse-numba", post_build)
    assert "--env HISPARSE_NUMBA_BACKEND simulator" in post_build
    assert "lessons copy" in post_build
    start = (BINDER / "start").read_text()
    assert "export HISPARSE_NUMBA_BACKEND=simulator" in start
    assert start.rstrip().endswith('exec "$@"')
    assert re.fullmatch(r"python-3\.\d+\s*", (BINDER / "runtime.txt").read_text())


@pytest.mark.slow
def test_binder_requirements_resolve_without_cuda_wheels(tmp_path):
    """What repo2docker would install, resolved by pip (needs the package index; ~20 s)."""
    report = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                          "--quiet", "--report", str(report), "-r", str(BINDER / "requirements.txt")],
                         capture_output=True, text=True, timeout=600)
    skip_when_the_index_is_unreachable(run)
    assert run.returncode == 0, run.stderr
    names = sorted(item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"])
    assert not [n for n in names if CUDA_WHEELS.match(n)], names
    for needed in ("numba", "numba-cuda", "numpy", "jupyterlab", "ipykernel", "matplotlib"):
        assert needed in names


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hisparse_numba", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def _pyproject_repo() -> str:
    """OWNER/NAME from the Repository line of pyproject.toml."""
    return PYPROJECT["project"]["urls"]["Repository"].removeprefix("https://github.com/")


def test_the_binder_badge_follows_the_repository_line_and_repo():
    from hisparse_numba import workshop

    link = f"https://mybinder.org/v2/gh/{_pyproject_repo()}/main?urlpath=lab/tree/my-lessons"
    assert workshop.binder_url() == link
    assert f"[![Binder](https://mybinder.org/badge_logo.svg)]({link})" in (ROOT / "lessons/README.md").read_text()
    out = _cli("lessons", "binder-badge", "--repo", "https://github.com/me/fork.git", "--branch", "class")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "[![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/me/fork/class"
        "?urlpath=lab/tree/my-lessons)", "https://mybinder.org/v2/gh/me/fork/class?urlpath=lab/tree/my-lessons"]


# ---------------------------------------------------------------------------- the workshop hub

def values() -> dict:
    return yaml.safe_load((HUB / "values.yaml").read_text())


def profiles() -> dict[str, dict]:
    return {p["slug"]: p for p in values()["singleuser"]["profileList"]}


def test_hub_has_a_default_simulator_profile_and_a_gpu_profile():
    assert set(profiles()) == {"simulator", "gpu"}
    sim, gpu = profiles()["simulator"], profiles()["gpu"]
    assert sim.get("default") is True and not gpu.get("default")
    assert sim["kubespawner_override"]["environment"]["HISPARSE_NUMBA_BACKEND"] == "simulator"
    assert gpu["kubespawner_override"]["environment"]["HISPARSE_NUMBA_BACKEND"] == "cuda"
    assert gpu["kubespawner_override"]["extra_resource_limits"] == {"nvidia.com/gpu": "1"}
    assert "nvidia.com/gpu" not in json.dumps(sim)
    assert values()["singleuser"]["extraEnv"]["HISPARSE_NUMBA_BACKEND"] == "simulator"


def test_hub_images_are_the_ones_the_dockerfile_builds():
    image = values()["singleuser"]["image"]
    dockerfile = (HUB / "Dockerfile").read_text()
    for slug, tag in (("simulator", "cpu"), ("gpu", "gpu")):
        assert profiles()[slug]["kubespawner_override"]["image"] == f"{image['name']}:{tag}"
        assert f"-t {image['name']}:{tag}" in dockerfile, f"the Dockerfile does not say how to build :{tag}"
    assert image["tag"] == "cpu"


def test_hub_images_follow_the_repository_line():
    from hisparse_numba import workshop

    owner, name = _pyproject_repo().lower().split("/")
    assert values()["singleuser"]["image"]["name"] == workshop.singleuser_image() == \
        f"ghcr.io/{owner}/{name}-singleuser"
    dockerfile = re.sub(r"\\\n#\s+", "", (HUB / "Dockerfile").read_text())  # its comment's continued lines
    for command in workshop.build_commands(workshop.singleuser_image()):
        if command.startswith("docker build"):
            assert command in dockerfile, command


def test_hub_values_without_options_are_the_file():
    out = _cli("hub-values")
    assert out.returncode == 0 and out.stdout == (HUB / "values.yaml").read_text(), out.stderr


@pytest.mark.parametrize("args, image", [(("--repo", "Me/Fork"), "ghcr.io/me/fork-singleuser"),
                                         (("--image", "registry.example.org:5000/class/hisparse"),
                                          "registry.example.org:5000/class/hisparse")])
def test_hub_values_rename_every_image(args, image):
    out = _cli("hub-values", *args)
    assert out.returncode == 0, out.stderr
    data = yaml.safe_load(out.stdout)
    assert data["singleuser"]["image"]["name"] == image
    assert {p["kubespawner_override"]["image"] for p in data["singleuser"]["profileList"]} == \
        {f"{image}:cpu", f"{image}:gpu"}
    assert "hisparse-numba/hisparse-numba" not in out.stdout
    assert f"docker build -f deploy/hub/Dockerfile -t {image}:cpu ." in out.stderr
    assert f"docker push {image}:gpu" in out.stderr
    assert yaml.safe_load(out.stdout.replace(image, "X")) == yaml.safe_load(
        (HUB / "values.yaml").read_text().replace(values()["singleuser"]["image"]["name"], "X"))


@pytest.mark.parametrize("args", [("--image", "Registry/UPPER"), ("--image", "x/y:tag"), ("--repo", "a/b/c"),
                                  ("--values", "no/such/values.yaml")])
def test_hub_values_refuse_bad_names_in_one_line(args):
    out = _cli("hub-values", *args)
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1, out.stderr


def test_dockerfile_installs_extras_that_exist_and_registers_the_kernel():
    dockerfile = (HUB / "Dockerfile").read_text()
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert re.search(r"^ARG EXTRAS=lessons$", dockerfile, re.MULTILINE)
    for used in re.findall(r"EXTRAS=([\w,]+)", dockerfile):
        assert set(used.split(",")) <= set(extras), used
    assert '/opt/hisparse-numba[${EXTRAS}]' in dockerfile
    assert "ipykernel install --sys-prefix --name hisparse-numba" in dockerfile
    assert re.search(r"^ENV HISPARSE_NUMBA_BACKEND=simulator", dockerfile, re.MULTILINE)
    assert re.search(r"^FROM \S+/base-notebook:python-3\.\d+$", dockerfile, re.MULTILINE)


def test_each_learner_gets_a_lesson_copy_once():
    single = values()["singleuser"]
    command = " ".join(single["lifecycleHooks"]["postStart"]["exec"]["command"])
    assert '[ -d "$HOME/lessons" ]' in command, "a restart must not overwrite the learner's work"
    assert 'hisparse-numba lessons copy "$HOME/lessons"' in command
    assert single["defaultUrl"] == "/lab/tree/lessons"
    assert values()["cull"]["enabled"] is True


# ---------------------------------------------------------------------------- the real-thing scripts

@pytest.mark.parametrize("script", ["hub_smoke_test.py", "browser_test.py"])
def test_scripts_are_bounded_in_time_and_take_a_lesson(script):
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "--timeout" in run.stdout and "lesson" in run.stdout


def _lesson_00() -> str:
    return str(sorted((ROOT / "lessons").glob("00-*.ipynb"))[0])


@pytest.mark.slow
def test_hub_smoke_test_runs_lesson_00():
    """About a minute: a real JupyterHub, a learner's server, lesson 00 through the kernel API."""
    pytest.importorskip("jupyterhub")
    proxy = ROOT / ".hub-node/node_modules/.bin/configurable-http-proxy"
    if not proxy.exists() and not shutil.which("configurable-http-proxy"):
        pytest.skip("configurable-http-proxy not installed (npm install --prefix .hub-node configurable-http-proxy)")
    run = subprocess.run([sys.executable, str(ROOT / "scripts/hub_smoke_test.py"), _lesson_00(),
                          "--timeout", "600"], capture_output=True, text=True, timeout=660,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "PASSED" in run.stdout


@functools.cache
def browser_test_module():
    """scripts/browser_test.py as a module (it imports process_marks from beside itself)."""
    import importlib.util

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location("browser_test", ROOT / "scripts" / "browser_test.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclass looks its module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


def _capture_notebook() -> dict:
    """The notebook whose run in JupyterLab 4.6 gave ``PAGE_CELLS``."""
    def code(source, tags=()):
        return {"cell_type": "code", "source": source, "metadata": {"tags": list(tags)}, "outputs": []}
    return {"cells": [{"cell_type": "markdown", "source": "# 99 · capture", "metadata": {}},
                      code('print("right: all good")'),
                      code('import sys; print("a warning line", file=sys.stderr)'),
                      code(['raise ValueError("expected to raise")\n'], tags=["raises-exception"]),
                      code("1 + 1"),
                      code('def f():\n    raise RuntimeError("planted error")\nf()'),
                      code('print("never")')]}


# What CELLS_JS returned in JupyterLab 4.6 after "Run All" on _capture_notebook(). On the page the
# stderr line of cell 3 and the tracebacks of cells 4 and 6 are the same element (class
# jp-OutputArea-output jp-RenderedText, data-mime-type application/vnd.jupyter.stderr); the
# notebook model tells them apart. Run-all stopped after cell 6: cell 7 never ran.
PAGE_CELLS = [
    {"prompt": "[1]:", "count": 1, "errors": []},
    {"prompt": "[2]:", "count": 2, "errors": []},
    {"prompt": "[3]:", "count": 3, "errors": [{"ename": "ValueError", "evalue": "expected to raise"}]},
    {"prompt": "[4]:", "count": 4, "errors": []},
    {"prompt": "[5]:", "count": 5, "errors": [{"ename": "RuntimeError", "evalue": "planted error"}]},
    {"prompt": "[ ]:", "count": None, "errors": []},
]


def test_browser_test_counts_errors_from_the_notebook_model_not_stderr():
    bt = browser_test_module()
    lesson = bt.lesson_cells(_capture_notebook())
    assert [(c.number, c.raises) for c in lesson] == [(2, False), (3, False), (4, True), (5, False), (6, False),
                                                      (7, False)]
    assert bt.error_count(PAGE_CELLS) == 2 and bt.cells_ran(PAGE_CELLS) == 5 and not bt.cells_busy(PAGE_CELLS)
    assert bt.unexpected_error(PAGE_CELLS, lesson) == (
        "cell 6 ('def f():') raised RuntimeError: planted error "
        "(not tagged raises-exception; the cells after it did not run)")


def test_browser_test_accepts_tagged_errors_and_stderr():
    bt = browser_test_module()
    lesson = bt.lesson_cells(_capture_notebook())
    clean = PAGE_CELLS[:4] + [{"prompt": "[5]:", "count": 5, "errors": []},
                              {"prompt": "[6]:", "count": 6, "errors": []}]
    assert bt.unexpected_error(clean, lesson) is None and bt.unraised(clean, lesson) == []
    assert bt.cells_ran(clean) == len(lesson) and bt.error_count(clean) == 1


def test_browser_test_fails_a_tagged_cell_that_raised_nothing_and_sees_busy_cells():
    bt = browser_test_module()
    lesson = bt.lesson_cells(_capture_notebook())
    quiet = [dict(c, errors=[]) for c in PAGE_CELLS[:3]]
    assert bt.unraised(quiet, lesson) == ["cell 4 ('raise ValueError(\"expected to raise\")') is tagged "
                                          "raises-exception but raised nothing"]
    busy = [{"prompt": "[*]:", "count": 3, "errors": []}]
    assert bt.cells_busy(busy) and bt.cells_ran(busy) == 0


def test_browser_test_turns_the_news_pop_up_off():
    settings = browser_test_module().LAB_SETTINGS
    assert settings["@jupyterlab/apputils-extension/notification.jupyterlab-settings"]["fetchNews"] == "false"
    assert settings["@jupyterlab/notebook-extension/tracker.jupyterlab-settings"] == {"windowingMode": "none"}


def _run_browser_test(lesson: Path, timeout: int = 540) -> subprocess.CompletedProcess:
    pytest.importorskip("playwright")
    run = subprocess.run([sys.executable, str(ROOT / "scripts/browser_test.py"), str(lesson),
                          "--timeout", str(timeout)], capture_output=True, text=True, timeout=timeout + 60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if "no Chromium found" in run.stderr:
        pytest.skip("no Chromium (python -m playwright install chromium, or apt-get install chromium)")
    return run


@pytest.mark.slow(seconds=60)
def test_browser_test_runs_lesson_00():
    """About a minute: JupyterLab in headless Chromium runs lesson 00 and shows its figures."""
    run = _run_browser_test(Path(_lesson_00()))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "PASSED" in run.stdout and "1 error outputs (1 cells tagged raises-exception)" in run.stdout


@pytest.mark.slow(seconds=60)
def test_browser_test_fails_on_a_lesson_that_raises_naming_the_cell(tmp_path):
    """Lesson 00 with a planted error in its fifth untagged code cell: the test stops there, well
    before its time limit, and names the cell."""
    nb = json.loads(Path(_lesson_00()).read_text())
    untagged = [n for n, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
                and "raises-exception" not in c["metadata"].get("tags", [])]
    nb["cells"][untagged[4]]["source"] = "raise RuntimeError('planted in the browser test')\n"
    planted = tmp_path / Path(_lesson_00()).name
    planted.write_text(json.dumps(nb))
    run = _run_browser_test(planted, timeout=400)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert ("FAILED after" in run.stdout and f"cell {untagged[4] + 1} (\"raise RuntimeError('planted in the "
            "browser test')\") raised RuntimeError: planted in the browser test" in run.stdout), run.stdout[-3000:]
    assert "cells ran within" not in run.stdout


# ---------------------------------------------------------------------------- the syllabus

SYLLABUS = (ROOT / "lessons" / "README.md").read_text()
COLAB = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
         "(https://colab.research.google.com/github/" + _pyproject_repo() + "/blob/main/lessons/{})")


def syllabus_rows() -> dict[str, tuple[int, list[str]]]:
    """id -> (minutes, prerequisites) from the syllabus table."""
    rows = {}
    for line in SYLLABUS.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.fullmatch(r"\d\d", cells[0]):
            rows[cells[0]] = (int(cells[2]), [] if cells[3] == "-" else cells[3].split(", "))
    return rows


def test_syllabus_links_every_lesson_with_its_badge():
    notebooks = sorted(p.name for p in (ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))
    rows = syllabus_rows()
    for name in notebooks:
        assert f"]({name})" in SYLLABUS, f"{name} is not linked"
        assert COLAB.format(name) in SYLLABUS, f"{name} has no Colab badge"
        assert name[:2] in rows
    for lesson, (minutes, needs) in rows.items():
        assert 5 <= minutes <= 60 and all(n < lesson for n in needs), lesson
