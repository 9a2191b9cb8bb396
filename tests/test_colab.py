"""The Colab setup cell: what it installs where, and its idempotent insertion into notebooks; the
badges' addresses for the pyproject repository and for ``--repo``."""

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from hisparse_numba.lessons import colab, runner

ROOT = Path(__file__).resolve().parents[1]
REPO = colab.REPOSITORY
T4 = ["GPU 0: Tesla T4 (UUID: GPU-0f6e...)"]
ON_COLAB = {"COLAB_RELEASE_TAG": "release-colab_20261120"}
WHEEL = "hisparse_numba-0.1.0-py3-none-any.whl"


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
    assert _run_cell_on_colab(monkeypatch, colab.colab_cell_source()) == f"hisparse-numba @ git+{REPO}"
    import os
    assert os.environ["HISPARSE_NUMBA_BACKEND"] == "simulator"


def _run_cell_on_colab(monkeypatch, source: str) -> str:
    """Execute the setup cell as on a Colab CPU runtime (no GPU, no uploads); what it pip-installs."""
    import glob

    monkeypatch.setenv("COLAB_RELEASE_TAG", "release")
    monkeypatch.delenv("HISPARSE_NUMBA_BACKEND", raising=False)
    monkeypatch.delenv("HISPARSE_NUMBA_SOURCE", raising=False)
    monkeypatch.setattr(glob, "glob", lambda pattern: [])
    calls = []

    def fake_run(cmd, *args, **kwargs):
        calls.append(cmd)
        if cmd[:1] == ["nvidia-smi"]:
            raise FileNotFoundError("nvidia-smi")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    exec(compile(source, "<colab cell>", "exec"), {})
    pip = [c for c in calls if "pip" in c]
    assert len(pip) == 1
    return pip[0][-1]


def test_the_source_comes_from_the_environment_then_the_form_then_an_upload_then_the_repository():
    url = f"https://files.example.org/{WHEEL}"
    uploaded = [f"/content/{WHEEL}"]
    plan = colab.colab_install_plan
    assert plan(dict(ON_COLAB, HISPARSE_NUMBA_SOURCE=url), {}, [], "git+https://example.org/x", uploaded) == \
        (f"hisparse-numba @ {url}", "simulator")
    assert plan(ON_COLAB, {}, T4, "git+https://gitlab.example.org/me/hisparse-numba@v1", uploaded) == \
        ("hisparse-numba[cuda12] @ git+https://gitlab.example.org/me/hisparse-numba@v1", "cuda")
    assert plan(ON_COLAB, {}, [], "", uploaded) == (f"hisparse-numba @ file:///content/{WHEEL}", "simulator")
    assert plan(ON_COLAB, {}, [], "  ", []) == (f"hisparse-numba @ git+{REPO}", "simulator")


def test_a_wheel_path_becomes_a_file_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    req, _ = colab.colab_install_plan(ON_COLAB, {}, [], WHEEL)
    assert req == f"hisparse-numba @ file://{tmp_path / WHEEL}"


def test_the_form_field_is_colabs_and_an_instructor_bakes_a_wheel_url_in(monkeypatch):
    url = f"https://files.example.org/class/{WHEEL}"
    src = colab.colab_cell_source(source=url)
    assert f'HISPARSE_NUMBA_SOURCE = "{url}"  # @param {{type:"string"}}' in src.splitlines()
    assert _run_cell_on_colab(monkeypatch, src) == f"hisparse-numba @ {url}"
    with pytest.raises(ValueError, match="without quotes"):
        colab.colab_cell_source(source='x"; import os')


def test_every_lesson_ships_the_current_setup_cell():
    for path in sorted((ROOT / "lessons").glob("[0-9][0-9]-*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if colab.SETUP_TAG in c["metadata"].get("tags", [])]
        assert len(cells) == 1 and "".join(cells[0]["source"]) == colab.colab_cell_source(), \
            f"{path.name}: run hisparse-numba lessons colab-cell lessons/"


@pytest.mark.parametrize("given", ["me/fork", "https://github.com/me/fork", "github.com/me/fork.git",
                                   "https://github.com/me/fork/"])
def test_a_repository_is_owner_slash_name_or_its_github_url(given):
    assert colab.github_url(given) == "https://github.com/me/fork"


@pytest.mark.parametrize("given", ["fork", "https://gitlab.com/me/fork", "me/fork/extra", "me fork/x"])
def test_anything_else_is_refused(given):
    with pytest.raises(ValueError, match="OWNER/NAME"):
        colab.github_url(given)


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


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "hisparse_numba", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def _badge_urls(table: str) -> list[str]:
    return re.findall(r"\]\((https://colab\.research\.google\.com/github/[^)]+)\)", table)


def test_colab_badges_follow_the_repository_line():
    """``lessons colab-badges``: one address per lesson, on the repository pyproject.toml names."""
    line = re.search(r'^Repository = "https://github\.com/([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    out = _cli("lessons", "colab-badges")
    assert out.returncode == 0, out.stderr
    names = sorted(p.name for p in (ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))
    assert _badge_urls(out.stdout) == [f"https://colab.research.google.com/github/{line[1]}/blob/main/lessons/{n}"
                                       for n in names]


def test_colab_badges_and_cells_follow_repo(tmp_path):
    out = _cli("lessons", "colab-badges", "--repo", "me/fork", "--branch", "workshop")
    assert out.returncode == 0, out.stderr
    urls = _badge_urls(out.stdout)
    assert urls and all(u.startswith("https://colab.research.google.com/github/me/fork/blob/workshop/lessons/")
                        for u in urls)
    lesson = sorted((ROOT / "lessons").glob("00-*.ipynb"))[0]
    (tmp_path / lesson.name).write_text(lesson.read_text())
    url = f"https://files.example.org/{WHEEL}"
    out = _cli("lessons", "colab-cell", str(tmp_path), "--repo", "me/fork", "--source", url)
    assert out.returncode == 0 and "1 notebook(s) changed" in out.stdout, out.stderr
    assert json.loads((tmp_path / lesson.name).read_text()) != json.loads(lesson.read_text())
    setup = "".join(nbformat.read(tmp_path / lesson.name, as_version=4).cells[1].source)
    assert setup == colab.colab_cell_source("https://github.com/me/fork", url)
    bad = _cli("lessons", "colab-badges", "--repo", "gitlab.com/me/fork")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "OWNER/NAME" in bad.stderr
