"""Workshop slides: one reveal.js deck per syllabus block, made from the lessons themselves.

A deck opens with the block's title and its lessons (minutes from the syllabus), then, lesson by
lesson, the notebook's Markdown cells (a cell that opens with a heading starts a new slide, the
others follow it as sub-slides, reached with the down arrow or the space bar) and the figures its
code cells drew. Code, printed text and the exercise cells' output are left out: the slides are
what an instructor talks over, the notebook is what the learner runs.

The figures come from the executed notebooks in ``build/lessons`` (what ``lessons run`` writes);
a lesson with no executed copy there, or one older than its notebook, is run first (shipped
form). nbconvert's ``SlidesExporter`` writes ``<out>/block-N-name.slides.html`` and
``index.html`` links them; the decks load reveal.js from a CDN when opened.
"""

from __future__ import annotations

from pathlib import Path

from . import runner, solutions, syllabus

HEADING_TAGS = ("#", "##")


def _slide(cell, slide_type: str):
    cell.metadata["slideshow"] = {"slide_type": slide_type}
    return cell


def lesson_cells(nb) -> list:
    """The slide cells of one executed lesson: its Markdown and its figures, in notebook order."""
    import nbformat

    exercises = {index for index, _ in solutions.exercise_cells(nb)}
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            starts = cell.source.lstrip().split(" ", 1)[0] in HEADING_TAGS or not cells
            cells.append(_slide(nbformat.v4.new_markdown_cell(cell.source), "slide" if starts else "subslide"))
        elif cell.cell_type == "code" and index not in exercises:
            for out in cell.get("outputs", []):
                png = out.get("data", {}).get("image/png") if out.get("output_type") == "display_data" else None
                if png:
                    figure = nbformat.v4.new_code_cell("")
                    figure.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png})]
                    cells.append(_slide(figure, "subslide"))
    return cells


def block_notebook(block: syllabus.Block, executed: dict):
    """One notebook for a block: a title slide, then every lesson of ``executed`` (``{id: executed
    notebook}``) in the block's order."""
    import nbformat

    rows = "\n".join(f"- **{l.id}** {l.title} ({l.minutes} min)" for l in block.lessons if l.id in executed)
    title = nbformat.v4.new_markdown_cell(f"# Block {block.number} · {block.name}\n\n{rows}\n\n"
                                          f"{sum(l.minutes for l in block.lessons if l.id in executed)} "
                                          "minutes of lessons")
    nb = nbformat.v4.new_notebook()
    nb.cells = [_slide(title, "slide")]
    for lesson in block.lessons:
        if lesson.id in executed:
            nb.cells += lesson_cells(executed[lesson.id])
    nb.metadata["title"] = f"Block {block.number} · {block.name}"
    return nb


def executed_notebook(lesson: runner.Lesson, executed_dir: Path, timeout: int = 600):
    """The executed copy of ``lesson`` in ``executed_dir``, run first when absent or stale."""
    import nbformat

    path = Path(executed_dir) / lesson.path.name
    if not path.is_file() or path.stat().st_mtime < lesson.path.stat().st_mtime:
        print(f"  running lesson {lesson.id} for its figures", flush=True)
        result = runner.run_lesson(lesson, Path(executed_dir), timeout)
        if not result.ok:
            print(f"  (lesson {lesson.id}: {result.detail}; its slides keep the figures drawn before)", flush=True)
    return nbformat.read(path, as_version=4)


def write_deck(nb, path: Path) -> Path:
    from nbconvert import SlidesExporter

    exporter = SlidesExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True,
                              reveal_scroll=True, reveal_number="c/t")
    html, _ = exporter.from_notebook_node(nb)
    path.write_text(html)
    return path


def build(out_dir="build/slides", numbers=(), lessons_dir=None, syllabus_path=None,
          executed_dir="build/lessons", timeout: int = 600) -> list[Path]:
    """Write the decks of the blocks ``numbers`` (default: all) and ``index.html``; the decks' paths.
    A lesson of the syllabus without a notebook in ``lessons_dir`` is left out (and said so)."""
    blocks = syllabus.read(syllabus_path or syllabus.default_path(lessons_dir or runner.default_lessons_dir()))
    known = {b.number for b in blocks}
    unknown = sorted(set(numbers) - known)
    if unknown:
        raise ValueError(f"no block {', '.join(map(str, unknown))} in the syllabus (blocks: "
                         f"{', '.join(str(b.number) for b in blocks)})")
    notebooks = {l.id: l for l in runner.discover(lessons_dir)}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    decks = []
    for block in blocks:
        if numbers and block.number not in numbers:
            continue
        missing = [l.id for l in block.lessons if l.id not in notebooks]
        if missing:
            print(f"block {block.number}: no notebook for lesson {', '.join(missing)}; left out", flush=True)
        executed = {l.id: executed_notebook(notebooks[l.id], Path(executed_dir), timeout)
                    for l in block.lessons if l.id in notebooks}
        if not executed:
            continue
        deck = write_deck(block_notebook(block, executed), out / f"{block.slug}.slides.html")
        print(f"block {block.number}: lessons {', '.join(executed)} -> {deck}", flush=True)
        decks.append((block, deck))
    _write_index(out, decks)
    return [deck for _, deck in decks]


def _write_index(out: Path, decks) -> None:
    from html import escape

    items = "\n".join(f'<li><a href="{deck.name}">Block {b.number} · {escape(b.name)}</a> '
                      f'({b.minutes} min: lessons {", ".join(l.id for l in b.lessons)})</li>' for b, deck in decks)
    (out / "index.html").write_text(f"<!doctype html>\n<meta charset=\"utf-8\">\n<title>hisparse-numba slides"
                                    f"</title>\n<h1>hisparse-numba: slides per block</h1>\n<ul>\n{items}\n</ul>\n")
