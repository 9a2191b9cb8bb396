"""pyproject.toml and environment.yml pin the same things; the README names what CI runs."""

import re
from pathlib import Path

import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"cupy-cuda12x": "cupy", "cupy-cuda13x": "cupy"}


def _split(req: str):
    m = re.match(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*?)\s*(;.*)?$", req)
    return m.group(1).lower(), m.group(3).replace(" ", "")


def _pyproject():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(data["dependencies"])
    for extra in ("lessons", "test", "ptx"):
        reqs += data["optional-dependencies"][extra]
    pins = {}
    for r in reqs:
        if "python_version" in r:
            continue
        name, spec = _split(r)
        pins[name] = spec
    return data, pins


def _environment():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
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


def test_environment_matches_pyproject():
    data, py = _pyproject()
    env, conda = _environment()
    assert "conda-forge" in env["channels"]
    assert conda["python"] == data["requires-python"]
    for name, spec in py.items():
        assert name in conda, f"{name} is in pyproject.toml but not in environment.yml"
        assert conda[name] == spec, f"{name}: pyproject {spec!r} vs environment.yml {conda[name]!r}"


def test_numpy_pin_excludes_2_5_and_numba_cuda_is_0_30():
    _, py = _pyproject()
    assert "<2.5" in py["numpy"] and ">=2" in py["numpy"]
    assert py["numba-cuda"] == ">=0.30,<0.31"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lessons" in readme
    assert re.search(r"^make test$", ci, re.M)
