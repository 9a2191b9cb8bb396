"""The workshop syllabus, read from ``docs/syllabus.md``: its blocks and each block's lessons.

A block is a heading ``## Block N · name`` followed by a table whose rows read
``| id | [title](../lessons/NN-name.ipynb) | minutes | needs | you learn |``. The slides
(``slides.py``) make one deck per block; the tests check that the minutes and paths here agree
with the notebooks and with every page that repeats them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

BLOCK_HEADING = re.compile(r"^## Block (\d+) · (.+?)\s*$")
LESSON_ROW = re.compile(r"^\|\s*(\d\d)\s*\|\s*\[(.+?)\]\(([^)]+\.ipynb)\)\s*\|\s*(\d+)\s*\|\s*([^|]*?)\s*\|")


@dataclass
class SyllabusLesson:
    id: str
    title: str
    link: str          # as written in the syllabus, relative to docs/
    minutes: int
    needs: list

    @property
    def filename(self) -> str:
        return Path(self.link).name


@dataclass
class Block:
    number: int
    name: str
    lessons: list = field(default_factory=list)

    @property
    def minutes(self) -> int:
        return sum(lesson.minutes for lesson in self.lessons)

    @property
    def slug(self) -> str:
        return f"block-{self.number}-" + re.sub(r"[^a-z0-9]+", "-", self.name.lower().replace("'", "")).strip("-")


def default_path(lessons_dir=None) -> Path:
    """``docs/syllabus.md`` beside the lessons folder (a source checkout), else the package's
    source tree's."""
    candidates = [Path(lessons_dir).resolve().parent / "docs" / "syllabus.md"] if lessons_dir else []
    candidates.append(Path(__file__).resolve().parents[2] / "docs" / "syllabus.md")
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError("no docs/syllabus.md beside the lessons (pass --syllabus FILE)")


def read(path) -> list[Block]:
    """The blocks of the syllabus at ``path``, in order (rows under other ``##`` sections are not
    read)."""
    blocks: list[Block] = []
    current = None
    for line in Path(path).read_text().splitlines():
        heading = BLOCK_HEADING.match(line)
        if heading:
            current = Block(int(heading.group(1)), heading.group(2))
            blocks.append(current)
        elif line.startswith("## "):
            current = None
        elif current is not None and LESSON_ROW.match(line):
            ident, title, link, minutes, needs = LESSON_ROW.match(line).groups()
            current.lessons.append(SyllabusLesson(ident, title, link, int(minutes), re.findall(r"\d\d", needs)))
    if not any(block.lessons for block in blocks):
        raise ValueError(f"{path}: no '## Block N · name' section with lesson rows")
    return blocks


def lessons(blocks: list[Block]) -> list[SyllabusLesson]:
    return [lesson for block in blocks for lesson in block.lessons]
