"""The zero-install and classroom routes: Binder (binder/), the workshop hub (deploy/hub/) and the
scripts that try them for real (scripts/hub_smoke_test.py, scripts/browser_test.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

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
    if run.returncode and re.search(r"connection|resolve|No matching distribution|network", run.stderr, re.I):
        pytest.skip(f"package index unreachable: {run.stderr.strip().splitlines()[-1]}")
    assert run.returncode == 0, run.stderr
    names = sorted(item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"])
    assert not [n for n in names if CUDA_WHEELS.match(n)], names
    for needed in ("numba", "numba-cuda", "numpy", "jupyterlab", "ipykernel", "matplotlib"):
        assert needed in names


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


@pytest.mark.slow
def test_browser_test_runs_lesson_00():
    """About a minute: JupyterLab in headless Chromium runs lesson 00 and shows its figures."""
    pytest.importorskip("playwright")
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no Chromium (apt-get install chromium)")
    run = subprocess.run([sys.executable, str(ROOT / "scripts/browser_test.py"), _lesson_00(),
                          "--timeout", "540"], capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "PASSED" in run.stdout
