"""Build hook: the wheel carries the lesson notebooks without moving lessons/.

``build_py`` copies ``lessons/NN-*.ipynb``, ``lessons/README.md`` and ``lessons/solutions/*.py``
into ``hisparse_numba/lessons/notebooks/`` of the build, where ``hisparse-numba lessons`` finds
them in a non-editable install. Everything else is in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGED = Path("hisparse_numba", "lessons", "notebooks")


def lesson_files():
    lessons = ROOT / "lessons"
    files = sorted(lessons.glob("[0-9][0-9]-*.ipynb")) + sorted((lessons / "solutions").glob("*.py"))
    readme = lessons / "README.md"
    return files + ([readme] if readme.is_file() else [])


class build_py_with_lessons(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads ./lessons directly
            return
        for path in lesson_files():
            target = Path(self.build_lib, PACKAGED, path.relative_to(ROOT / "lessons"))
            self.mkpath(str(target.parent))
            self.copy_file(str(path), str(target))


setup(cmdclass={"build_py": build_py_with_lessons})
