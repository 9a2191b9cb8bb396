"""Google Colab: the "Open in Colab" badge of each lesson and the setup cell every lesson opens with.

The setup cell is the first code cell of every notebook. On Colab it pip-installs hisparse-numba:
the plain package on a CPU runtime (kernels run in the CUDA simulator) and the ``cuda12`` extra on
a GPU runtime (a T4: CuPy and NVVM for CUDA 12). Anywhere else it does nothing, so the same notebook
runs unchanged under ``make lessons`` and in JupyterLab. What it installs from, first found:

1. ``HISPARSE_NUMBA_SOURCE``, an environment variable or the cell's form field (an instructor bakes
   it in with ``lessons colab-cell --source``): a wheel URL, a wheel's path, or a ``git+https`` URL;
2. a wheel uploaded into Colab's working folder (``/content/hisparse_numba-*.whl``);
3. ``git+`` the repository, which must then be published.

The cell cannot import hisparse-numba (it installs it), so it carries its own copy of the
decision, :func:`colab_install_plan`, whose source is pasted into the cell; the tests call the
same function. The repository URL is defined once, in ``pyproject.toml``
(``[project.urls] Repository``); ``--repo OWNER/NAME`` on ``lessons colab-cell`` and
``lessons colab-badges`` points the cells and badges at another one.
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

SETUP_TAG = "colab-setup"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
DEFAULT_BRANCH = "main"


def colab_install_plan(environ, modules, gpu_names, source="", uploaded=()):
    """What the setup cell installs: ``None`` off Colab, else ``(pip requirement, backend)``.

    environ: the process environment; modules: ``sys.modules``; gpu_names: the GPUs
    ``nvidia-smi -L`` lists (empty on a CPU runtime); source: the cell's form field; uploaded: the
    hisparse-numba wheels in Colab's working folder. Colab is recognised by its
    ``COLAB_RELEASE_TAG`` variable or an imported ``google.colab``.
    """
    on_colab = "COLAB_RELEASE_TAG" in environ or "google.colab" in modules
    if not on_colab:
        return None
    source = environ.get("HISPARSE_NUMBA_SOURCE", "").strip() or source.strip()
    if not source and uploaded:
        source = sorted(uploaded)[-1]
    if not source:
        source = "git+" + REPOSITORY
    if "://" not in source:  # a wheel on disk
        source = "file://" + os.path.abspath(source)
    if gpu_names:
        return "hisparse-numba[cuda12] @ " + source, "cuda"
    return "hisparse-numba @ " + source, "simulator"


def _uploaded_wheels():
    """hisparse-numba wheels uploaded through Colab's Files panel (it puts them in /content)."""
    import glob

    return glob.glob("/content/hisparse_numba-*.whl")


def _list_gpus():
    """GPU names from ``nvidia-smi -L``; empty when there is no driver or no GPU."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in out.stdout.splitlines() if line.startswith("GPU ")] if out.returncode == 0 else []


COLAB_CELL = '''\
# Setup for Google Colab, and on a GPU whose kernel cache lacks this lesson's kernels a line that
# says so and for about how long they compile; does nothing else anywhere else.
# On Colab it installs hisparse-numba: the CUDA simulator on a CPU runtime, CUDA 12 on a GPU runtime,
# from HISPARSE_NUMBA_SOURCE (a wheel URL, a wheel's path or a git+https URL), else from a wheel
# uploaded to /content (Files panel), else from the repository below (published on GitHub).
import os, subprocess, sys

REPOSITORY = "{repository}"
HISPARSE_NUMBA_SOURCE = "{source}"  # @param {{type:"string"}}

{list_gpus}

{uploaded_wheels}

{install_plan}

_plan = colab_install_plan(os.environ, sys.modules, _list_gpus(), HISPARSE_NUMBA_SOURCE, _uploaded_wheels())
if _plan is not None:
    print("Colab: pip install", _plan[0], "(about a minute)")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", _plan[0]], check=True)
    os.environ["HISPARSE_NUMBA_BACKEND"] = _plan[1]
    print("Colab: ready, backend", _plan[1])
try:
    from hisparse_numba.compile_notice import print_if_cold
    print_if_cold()
except ImportError:
    pass
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


def github_url(repo: str | None) -> str:
    """``https://github.com/OWNER/NAME`` for ``OWNER/NAME`` or a GitHub URL; the pyproject one for None."""
    if repo is None:
        return REPOSITORY
    match = re.fullmatch(r"(?:(?:https?://)?github\.com/)?([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repo.strip())
    if not match:
        raise ValueError(f"{repo!r} is not a GitHub repository: give OWNER/NAME or https://github.com/OWNER/NAME")
    return f"https://github.com/{match[1]}/{match[2]}"


def colab_cell_source(repository: str | None = None, source: str = "") -> str:
    """The setup cell's source for ``repository`` (default: the one in ``pyproject.toml``), with
    ``source`` (a wheel URL, a wheel's path or a git+https URL) as its form field's default."""
    if '"' in source or "\\" in source:
        raise ValueError(f"source {source!r}: a URL or a path without quotes or backslashes")
    return COLAB_CELL.format(
        repository=github_url(repository),
        source=source,
        list_gpus=inspect.getsource(_list_gpus).strip(),
        uploaded_wheels=inspect.getsource(_uploaded_wheels).strip(),
        install_plan=inspect.getsource(colab_install_plan).strip(),
    ).rstrip("\n")


def colab_url(notebook: str | Path, repository: str | None = None, branch: str = DEFAULT_BRANCH) -> str:
    """The Colab address that opens ``lessons/<notebook name>`` from the GitHub repository."""
    repo = github_url(repository).removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{repo}/blob/{branch}/lessons/{Path(notebook).name}"


def badge(notebook: str | Path, repository: str | None = None, branch: str = DEFAULT_BRANCH) -> str:
    """Markdown for the "Open in Colab" badge of one lesson notebook."""
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(notebook, repository, branch)})"


def badge_table(lessons, repository: str | None = None, branch: str = DEFAULT_BRANCH) -> str:
    """A Markdown table: lesson id, title, badge (``lessons`` from ``runner.discover``)."""
    rows = ["| Lesson | Title | Colab |", "|---|---|---|"]
    for lesson in lessons:
        rows.append(f"| {lesson.id} | {lesson.title} | {badge(lesson.path, repository, branch)} |")
    return "\n".join(rows)


def with_setup_cell(nb, repository: str | None = None, source: str = "") -> bool:
    """Make the setup cell the first code cell of ``nb`` (a nbformat v4 notebook), in place.

    Idempotent: an existing cell tagged ``colab-setup`` is updated and moved, never duplicated.
    Returns True when the notebook changed."""
    import nbformat

    cell_source = colab_cell_source(repository, source)
    existing = [c for c in nb.cells if SETUP_TAG in c.get("metadata", {}).get("tags", [])]
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    if len(existing) == 1 and code_cells and code_cells[0] is existing[0] and existing[0].source == cell_source:
        return False
    nb.cells = [c for c in nb.cells if c not in existing]
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    cell = nbformat.v4.new_code_cell(cell_source, metadata={"tags": [SETUP_TAG]})
    cell.pop("id", None)
    if "id" in (nb.cells[0] if nb.cells else {}):
        cell["id"] = "colab-setup"
    nb.cells.insert(first_code, cell)
    return True


def add_setup_cells(paths, repository: str | None = None, source: str = "") -> list[Path]:
    """Insert or update the setup cell in each notebook file; the files that changed."""
    import nbformat

    changed = []
    for path in map(Path, paths):
        nb = nbformat.read(path, as_version=4)
        if with_setup_cell(nb, repository, source):
            nbformat.write(nb, path)
            changed.append(path)
    return changed
