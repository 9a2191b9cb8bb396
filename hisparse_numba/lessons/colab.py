"""Google Colab: the "Open in Colab" badge of each lesson and the setup cell every lesson opens with.

The setup cell is the first code cell of every notebook. On Colab it pip-installs hisparse-numba
from the repository: the plain package on a CPU runtime (kernels run in the CUDA simulator) and
the ``cuda12`` extra on a GPU runtime (a T4: CuPy and NVVM for CUDA 12). Anywhere else it does
nothing, so the same notebook runs unchanged under ``make lessons`` and in JupyterLab.

The cell cannot import hisparse-numba (it installs it), so it carries its own copy of the
decision, :func:`colab_install_plan`, whose source is pasted into the cell; the tests call the
same function. The repository URL is defined once, in ``pyproject.toml``
(``[project.urls] Repository``); a fork changes that line and re-runs
``hisparse-numba lessons colab-cell lessons/`` to rewrite the cells and ``lessons colab-badges``
for the badge table.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

SETUP_TAG = "colab-setup"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
DEFAULT_BRANCH = "main"


def colab_install_plan(environ, modules, gpu_names):
    """What the setup cell installs: ``None`` off Colab, else ``(pip requirement, backend)``.

    environ: the process environment; modules: ``sys.modules``; gpu_names: the GPUs
    ``nvidia-smi -L`` lists (empty on a CPU runtime). Colab is recognised by its
    ``COLAB_RELEASE_TAG`` variable or an imported ``google.colab``.
    """
    on_colab = "COLAB_RELEASE_TAG" in environ or "google.colab" in modules
    if not on_colab:
        return None
    if gpu_names:
        return "hisparse-numba[cuda12] @ git+" + REPOSITORY, "cuda"
    return "hisparse-numba @ git+" + REPOSITORY, "simulator"


def _list_gpus():
    """GPU names from ``nvidia-smi -L``; empty when there is no driver or no GPU."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in out.stdout.splitlines() if line.startswith("GPU ")] if out.returncode == 0 else []


COLAB_CELL = '''\
# Setup for Google Colab; does nothing anywhere else (make lessons, JupyterLab, a hub).
# On Colab it installs hisparse-numba: the CUDA simulator on a CPU runtime, CUDA 12 on a GPU runtime.
import os, subprocess, sys

REPOSITORY = "{repository}"

{list_gpus}

{install_plan}

_plan = colab_install_plan(os.environ, sys.modules, _list_gpus())
if _plan is not None:
    print("Colab: pip install", _plan[0], "(about a minute)")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", _plan[0]], check=True)
    os.environ["HISPARSE_NUMBA_BACKEND"] = _plan[1]
    print("Colab: ready, backend", _plan[1])
'''


def repository_url(root: Path | None = None) -> str:
    """``[project.urls] Repository`` of the checkout's ``pyproject.toml``, else of the installed package."""
    root = root or Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        match = re.search(r'^\s*Repository\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        if match:
            return match.group(1).rstrip("/")
    from importlib import metadata

    for entry in metadata.metadata("hisparse-numba").get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "repository":
            return url.strip().rstrip("/")
    raise LookupError("no Repository URL in pyproject.toml [project.urls]")


REPOSITORY = repository_url()


def colab_cell_source(repository: str | None = None) -> str:
    """The setup cell's source for ``repository`` (default: the one in ``pyproject.toml``)."""
    return COLAB_CELL.format(
        repository=repository or REPOSITORY,
        list_gpus=inspect.getsource(_list_gpus).strip(),
        install_plan=inspect.getsource(colab_install_plan).strip(),
    ).rstrip("\n")


def colab_url(notebook: str | Path, repository: str | None = None, branch: str = DEFAULT_BRANCH) -> str:
    """The Colab address that opens ``lessons/<notebook name>`` from the GitHub repository."""
    repo = (repository or REPOSITORY).removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{repo}/blob/{branch}/lessons/{Path(notebook).name}"


def badge(notebook: str | Path, repository: str | None = None, branch: str = DEFAULT_BRANCH) -> str:
    """Markdown for the "Open in Colab" badge of one lesson notebook."""
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(notebook, repository, branch)})"


def badge_table(lessons, repository: str | None = None) -> str:
    """A Markdown table: lesson id, title, badge (``lessons`` from ``runner.discover``)."""
    rows = ["| Lesson | Title | Colab |", "|---|---|---|"]
    for lesson in lessons:
        rows.append(f"| {lesson.id} | {lesson.title} | {badge(lesson.path, repository)} |")
    return "\n".join(rows)


def with_setup_cell(nb, repository: str | None = None) -> bool:
    """Make the setup cell the first code cell of ``nb`` (a nbformat v4 notebook), in place.

    Idempotent: an existing cell tagged ``colab-setup`` is updated and moved, never duplicated.
    Returns True when the notebook changed."""
    import nbformat

    source = colab_cell_source(repository)
    existing = [c for c in nb.cells if SETUP_TAG in c.get("metadata", {}).get("tags", [])]
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    if len(existing) == 1 and code_cells and code_cells[0] is existing[0] and existing[0].source == source:
        return False
    nb.cells = [c for c in nb.cells if c not in existing]
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [SETUP_TAG]})
    cell.pop("id", None)
    if "id" in (nb.cells[0] if nb.cells else {}):
        cell["id"] = "colab-setup"
    nb.cells.insert(first_code, cell)
    return True


def add_setup_cells(paths, repository: str | None = None) -> list[Path]:
    """Insert or update the setup cell in each notebook file; the files that changed."""
    import nbformat

    changed = []
    for path in map(Path, paths):
        nb = nbformat.read(path, as_version=4)
        if with_setup_cell(nb, repository):
            nbformat.write(nb, path)
            changed.append(path)
    return changed
