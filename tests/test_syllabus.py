"""docs/syllabus.md is the one syllabus: every page that repeats a lesson's notebook or minutes
agrees with it, and so do the notebooks themselves.

Checked: the syllabus against each notebook (file name, minutes in its metadata and its "Time"
line, prerequisites); lessons/README.md's table and its Colab badges; the minutes in the
instructor notes' headings; the lesson minutes of each path through the course, and the half
day's parts against their clock times; the order of the blocks and of the half day against the
lessons' needs; the links from the other pages to the syllabus and the instructor notes."""

import re
from pathlib import Path

import nbformat
import pytest

from hisparse_numba.lessons import runner, syllabus

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = syllabus.read(ROOT / "docs" / "syllabus.md")
PLANNED = {l.id: l for l in syllabus.lessons(BLOCKS)}
NOTEBOOKS = {l.id: l for l in runner.discover(ROOT / "lessons")}
TIME_LINE = re.compile(r"\*\*Time:\*\* about (\d+) minutes")


def test_every_lesson_is_in_the_syllabus_once():
    ids = [l.id for l in syllabus.lessons(BLOCKS)]
    assert len(ids) == len(set(ids)), f"a lesson appears twice: {ids}"
    assert set(NOTEBOOKS) <= set(ids), f"lessons missing from docs/syllabus.md: {sorted(set(NOTEBOOKS) - set(ids))}"


@pytest.mark.parametrize("ident", sorted(PLANNED))
def test_the_syllabus_row_is_the_notebook(ident):
    planned = PLANNED[ident]
    assert planned.link == f"../lessons/{planned.filename}"
    assert ident in NOTEBOOKS, f"docs/syllabus.md lists lessons/{planned.filename}: no such notebook"
    lesson = NOTEBOOKS[ident]
    assert lesson.path.name == planned.filename
    assert lesson.minutes == planned.minutes, f"{lesson.path.name}: metadata {lesson.minutes} min"
    assert lesson.prerequisites == planned.needs, f"{lesson.path.name}: prerequisites {lesson.prerequisites}"
    text = "\n".join(c.source for c in nbformat.read(lesson.path, as_version=4).cells if c.cell_type == "markdown")
    stated = TIME_LINE.findall(text)
    assert stated == [str(planned.minutes)], f"{lesson.path.name} says **Time:** about {stated} minutes"


def test_blocks_come_after_what_their_lessons_need():
    done = set()
    for block in BLOCKS:
        for lesson in block.lessons:
            missing = [n for n in lesson.needs if n not in done]
            assert not missing, f"block {block.number}: lesson {lesson.id} needs {missing}, not taught before it"
            done.add(lesson.id)


COLAB = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
         "(https://colab.research.google.com/github/hisparse-numba/hisparse-numba/blob/main/lessons/{})")


def test_the_lessons_readme_table_is_the_syllabus():
    readme = (ROOT / "lessons" / "README.md").read_text()
    row = re.compile(r"^\| (\d\d) \| \[.+?\]\(([^)]+\.ipynb)\) \| (\d+) \| ([^|]*) \|.*\| (.+) \|$", re.M)
    rows = {m.group(1): m for m in row.finditer(readme)}
    assert sorted(rows) == sorted(PLANNED)
    for ident, m in rows.items():
        planned = PLANNED[ident]
        assert (m.group(2), int(m.group(3)), re.findall(r"\d\d", m.group(4))) == (
            planned.filename, planned.minutes, planned.needs), f"lessons/README.md row {ident}"
        assert m.group(5) == COLAB.format(planned.filename), f"lessons/README.md row {ident}: its Colab badge"


def test_the_instructor_notes_cover_every_lesson_with_its_minutes():
    notes = (ROOT / "docs" / "instructor-notes.md").read_text()
    headings = {m.group(1): int(m.group(2)) for m in re.finditer(r"^## (\d\d) · .+\((\d+) min\)$", notes, re.M)}
    assert sorted(headings) == [f"{i:02d}" for i in range(14)]
    for ident, minutes in headings.items():
        assert minutes == PLANNED[ident].minutes, f"instructor notes: lesson {ident} has {minutes} min"
    for page in ("instructors/14-15.md", "instructors/16.md"):
        assert f"]({page})" in notes


def _path_tables(text: str):
    """``(path heading, lesson ids, lesson minutes)`` of each row of the syllabus's path tables
    (bold ids, the last column a number)."""
    section = text.split("## Paths through the course", 1)[1].split("\n## ", 1)[0]
    heading = ""
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("### "):
            heading = line[4:]
        elif line.startswith("|") and cells[-1].isdigit():
            yield heading, re.findall(r"\*\*(\d\d)\*\*", line), int(cells[-1])


PATHS = list(_path_tables((ROOT / "docs" / "syllabus.md").read_text()))


def test_each_path_adds_up():
    assert {heading.split(" (")[0] for heading, _, _ in PATHS} == {
        "The whole course", "A half day", "About two hours"}
    for heading, ids, minutes in PATHS:
        assert ids and all(i in PLANNED for i in ids), (heading, ids)
        assert sum(PLANNED[i].minutes for i in ids) == minutes, f"{heading}: {ids} are not {minutes} minutes"


def test_each_half_day_part_fits_its_time_and_comes_after_what_it_needs():
    parts = [(heading, ids, minutes) for heading, ids, minutes in PATHS if heading.startswith("A half day")]
    section = (ROOT / "docs" / "syllabus.md").read_text().split("### A half day", 1)[1].split("\n### ", 1)[0]
    slots = re.findall(r"^\| (\d\d):(\d\d)-(\d\d):(\d\d) \| .*\*\*", section, re.M)
    assert len(parts) == len(slots) >= 5
    seen = set()
    for (_, ids, minutes), (h0, m0, h1, m1) in zip(parts, slots):
        assert len(ids) <= 4 and minutes <= (int(h1) * 60 + int(m1)) - (int(h0) * 60 + int(m0)) <= 60, ids
        for i, ident in enumerate(ids):
            assert set(PLANNED[ident].needs) <= seen | set(ids[:i]), f"half day: {ident} before what it needs"
        seen |= set(ids)


def test_the_whole_course_takes_every_block_in_order():
    days = [ids for heading, ids, _ in PATHS if heading.startswith("The whole course")]
    assert [i for ids in days for i in ids] == [l.id for b in BLOCKS for l in b.lessons]


@pytest.mark.parametrize("page", ["README.md", "docs/workshop.md", "docs/instructor-notes.md",
                                  "lessons/README.md", "docs/README.md"])
def test_the_other_pages_point_at_the_syllabus(page):
    text = (ROOT / page).read_text()
    assert "syllabus.md" in text, page
    assert "2-hour path" not in text and "half-day path" not in text, f"{page} keeps its own path"
