"""The Colab setup cell: what it installs where, and its idempotent insertion into notebooks."""

import json
from pathlib import Path

import nbformat
import pytest

from hisparse_numba.lessons import colab, runner

ROOT = Path(__file__).resolve().parents[1]
REPO = colab.REPOSITORY
T4 = ["GPU 0: Tesla T4 (UUID: GPU-0f6e...)"]


def test_off_colab_nothing_is_installed():
    assert colab.colab_install_plan({"HOME": "/root"}, {}, T4) is None
    assert colab.colab_install_plan({}, {"numpy": object()}, []) is None


def test_colab_cpu_runtime_installs_the_plain_package_for_the_simulator():
    req, backend = colab.colab_install_plan({"COLAB_RELEASE_TAG": "release-colab_20261120"}, {}, [])
    assert req == f"hisparse-numba @ git+{REPO}" and backend == "simulator"


def test_colab_gpu_runtime_installs_the_cuda12_extra():
    req, backend = colab.colab_install_plan({}, {"google.colab": object()}, T4)
    assert req == f"hisparse-numba[cuda12] @ git+{REPO}" and backend == "cuda"


def test_the_cell_runs_off_colab_and_does_nothing(capsys, monkeypatch):
    import subprocess

    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    calls = []

    def fake_run(cmd, *args, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "GPU 0: NVIDIA H200 (UUID: GPU-1)\n", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    exec(compile(colab.colab_cell_source(), "<colab cell>", "exec"), {})
    assert not any("pip" in c for c in calls) and capsys.readouterr().out == ""


def test_the_cell_on_a_colab_cpu_runtime_pip_installs_and_picks_the_simulator(capsys, monkeypatch):
    import subprocess

    monkeypatch.setenv("COLAB_RELEASE_TAG", "release")
    monkeypatch.delenv("HISPARSE_NUMBA_BACKEND", raising=False)
    calls = []

    def fake_run(cmd, *args, **kwargs):
        calls.append(cmd)
        if cmd[:1] == ["nvidia-smi"]:
            raise FileNotFoundError("nvidia-smi")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    exec(compile(colab.colab_cell_source(), "<colab cell>", "exec"), {})
    import os
    assert os.environ["HISPARSE_NUMBA_BACKEND"] == "simulator"
    pip = [c for c in calls if "pip" in c]
    assert pip and pip[0][-1] == f"hisparse-numba @ git+{REPO}"


def test_a_fork_changes_one_line():
    src = colab.colab_cell_source("https://github.com/someone/fork")
    assert 'REPOSITORY = "https://github.com/someone/fork"' in src and REPO not in src
    assert colab.colab_url("lessons/03-x.ipynb", "https://github.com/someone/fork") == \
        "https://colab.research.google.com/github/someone/fork/blob/main/lessons/03-x.ipynb"


def test_badge_table_has_one_badge_per_lesson():
    lessons = runner.discover(ROOT / "lessons")
    table = colab.badge_table(lessons)
    assert table.count(colab.BADGE_IMAGE) == len(lessons)
    assert f"[![Open In Colab]({colab.BADGE_IMAGE})]({colab.colab_url(lessons[0].path)})" in table


@pytest.fixture
def notebook_copies(tmp_path):
    """Copies of lessons 00-02 without their setup cell (the lessons ship with one)."""
    for path in sorted((ROOT / "lessons").glob("0[0-2]-*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nb.cells = [c for c in nb.cells if colab.SETUP_TAG not in c.metadata.get("tags", [])]
        nbformat.write(nb, tmp_path / path.name)
    return sorted(tmp_path.glob("*.ipynb"))


def test_the_cell_becomes_the_first_code_cell_once(notebook_copies):
    before = [nbformat.read(p, as_version=4) for p in notebook_copies]
    assert colab.add_setup_cells(notebook_copies) == notebook_copies
    first = [p.read_text() for p in notebook_copies]
    assert colab.add_setup_cells(notebook_copies) == []          # idempotent
    assert [p.read_text() for p in notebook_copies] == first
    for path, old in zip(notebook_copies, before):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code[0].metadata["tags"] == [colab.SETUP_TAG] and code[0].source == colab.colab_cell_source()
        assert code[0].outputs == [] and code[0].execution_count is None
        assert [c.source for c in nb.cells if colab.SETUP_TAG not in c.metadata.get("tags", [])] == \
            [c.source for c in old.cells]
        assert nb.cells[0].cell_type == "markdown"                # the title stays on top


def test_a_changed_repository_updates_the_cell_in_place(notebook_copies):
    colab.add_setup_cells(notebook_copies)
    assert colab.add_setup_cells(notebook_copies, "https://github.com/someone/fork") == notebook_copies
    nb = json.loads(notebook_copies[0].read_text())
    setup = [c for c in nb["cells"] if colab.SETUP_TAG in c["metadata"].get("tags", [])]
    assert len(setup) == 1 and "someone/fork" in "".join(setup[0]["source"])
