"""A learner's own copy of the lessons, and the ``hisparse-numba`` Jupyter kernel.

``hisparse-numba lessons copy DIR`` copies the lesson notebooks and the syllabus into DIR (from
``./lessons`` in a checkout, from the package in a wheel install), so that saving a worked notebook
never touches the tracked ``lessons/``. Solutions are not copied. ``hisparse-numba kernel install``
registers this interpreter as the kernel ``hisparse-numba``, running the lessons' rung of each
kernel ladder (``HISPARSE_NUMBA_VERSION``, as ``lessons run`` does).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from .runner import default_lessons_dir, lesson_kernel_env

KERNEL_NAME = "hisparse-numba"
KERNEL_DISPLAY_NAME = "Python 3 (hisparse-numba)"


def copy_lessons(dest, lessons_dir=None, force: bool = False) -> list[Path]:
    """Copy ``NN-*.ipynb`` and ``README.md`` into ``dest``; the files written.

    An existing notebook in ``dest`` (a learner's work) is kept unless ``force``."""
    source = Path(lessons_dir or default_lessons_dir())
    notebooks = sorted(source.glob("[0-9][0-9]-*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"no lesson notebooks in {source}")
    dest = Path(dest).expanduser()
    files = notebooks + [p for p in (source / "README.md",) if p.is_file()]
    kept = [p.name for p in files if (dest / p.name).exists()]
    if kept and not force:
        raise FileExistsError(f"{dest} already holds {', '.join(kept[:3])}{' ...' if len(kept) > 3 else ''}; "
                              "your work is kept: pick another folder or add --force to overwrite")
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in files:
        shutil.copyfile(path, dest / path.name)
        written.append(dest / path.name)
    return written


def install_kernel(user: bool = False, prefix: str | None = None) -> str:
    """Register this Python as the Jupyter kernel ``hisparse-numba``; the kernelspec's folder.

    Default: inside this environment (``sys.prefix``), what a venv, a conda env or a hub image wants."""
    from ipykernel.kernelspec import install

    if not user and prefix is None:
        prefix = sys.prefix
    return install(user=user, prefix=prefix, kernel_name=KERNEL_NAME, display_name=KERNEL_DISPLAY_NAME,
                   env=lesson_kernel_env())    # the lessons' rung of each kernel ladder
