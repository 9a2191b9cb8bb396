"""The puzzles' pictures: who touched what (right or wrong), and what the reference writes.

``show(puzzle, learner, case=None)`` runs the learner's kernel on one case and draws its accesses
(``threadviz``: one grid per buffer, each cell labelled ``block,thread``; shared memory and barrier
intervals too where ``threadviz.show`` draws them), with a title saying whether the case came out
right. While the kernel is a stub, or on a GPU (where nothing can be recorded), it draws the case's
inputs and the reference's outputs instead, values in the cells. ``draw_run`` is the checker's
picture of a wrong case.
"""

from __future__ import annotations

import numpy as np

from ... import device
from .. import threadviz
from ..ex00 import LearnerError, NotYet
from .harness import POISON, Puzzle, Run, problems_of, run_case

MAX_CELLS = 64                            # a value picture shows at most this many cells per array


def _buffers(puzzle: Puzzle, run: Run) -> list:
    names = list(puzzle.draw or [k for k, v in run.case.args.items() if isinstance(v, np.ndarray)])
    shared = [k for k in run.trace.arrays if k not in run.case.args] if puzzle.draw_shared else []
    return [n for n in names + shared if n in run.trace.arrays]


def draw_run(puzzle: Puzzle, run: Run, highlight=(), title: str = ""):
    """The accesses of one recorded run (nothing on a GPU); the reference's changes in grey."""
    if run.trace is None:
        return None
    import matplotlib.pyplot as plt

    expected = {k: _not_poison(w) for k, w in run.case.want.items()}
    fig = threadviz.draw(run.trace, _buffers(puzzle, run), cols=puzzle.cols, highlight=highlight,
                         expected=expected, title=title, by_interval=bool(run.trace.barriers))
    plt.show()
    return fig


def _not_poison(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    marker = np.array(POISON, np.int64).astype(a.dtype) if a.dtype.kind in "iu" else a.dtype.type(POISON)
    return a != marker


def show(puzzle: Puzzle, learner, case: str | None = None):
    """Draw the learner's kernel on one case (default: the first), right or wrong."""
    cases = puzzle.cases()
    chosen = next((c for c in cases if c.name == case), None) if case else cases[0]
    if chosen is None:
        print(f"no case named {case!r}; the cases are {', '.join(repr(c.name) for c in cases)}")
        return None
    if not device.SIMULATOR:
        print("(the accesses need the simulator, NUMBA_ENABLE_CUDASIM=1: here is what the reference "
              "writes)")
        return draw_values(puzzle, chosen, f"{chosen.label()}: the inputs and what the reference writes")
    try:
        run = run_case(puzzle, learner, chosen)
    except NotYet:
        return draw_values(puzzle, chosen, f"{chosen.label()}: your kernel is still a stub; this is what "
                                           "the reference writes (·: POISON, an element nobody writes)")
    except LearnerError as err:
        print(f"wrong: {err}")
        return draw_values(puzzle, chosen, f"{chosen.label()}: what the reference writes")
    found = problems_of(puzzle, run)
    verdict = f"wrong: {found[0][:110]}" if found else "right"
    title = f"{chosen.label()}: your kernel's accesses ({verdict})"
    return draw_run(puzzle, run, found[1] if found else (), title)


def draw_values(puzzle: Puzzle, case, title: str):
    """The case's arrays, inputs then the reference's outputs, one value per cell."""
    import matplotlib.pyplot as plt

    view = puzzle.as_values or (lambda c, a: a)
    panels = [(k, view(case, v)) for k, v in case.args.items() if isinstance(v, np.ndarray) and k not in case.want]
    panels += [(f"{k} (the reference)", view(case, v)) for k, v in case.want.items()]
    rows = [(name, _grid(a)) for name, a in panels]
    height = 0.9 + sum(0.45 + 0.32 * g.shape[0] for _, g in rows)
    width = max(8.0, 0.55 * max(g.shape[1] for _, g in rows))
    fig, axes = plt.subplots(len(rows), 1, figsize=(width, height), squeeze=False,
                             gridspec_kw={"height_ratios": [g.shape[0] + 1 for _, g in rows]})
    for ax, (name, g) in zip(axes[:, 0], rows):
        _value_panel(ax, name, g)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    plt.show()
    return fig


def _grid(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim == 2 and a.shape[1] <= 32:
        return a[: max(1, MAX_CELLS // max(a.shape[1], 1))]
    flat = a.reshape(-1)[:MAX_CELLS]
    width = min(16, max(flat.size, 1))
    pad = -flat.size % width
    cells = np.concatenate([flat.astype(object), np.full(pad, None, object)])
    return cells.reshape(-1, width)


def _value_panel(ax, name, g):
    import matplotlib.patches as patches

    ax.axis("off")
    for (y, x), v in np.ndenumerate(g):
        if v is None:
            continue
        poisoned = np.ndim(v) == 0 and v == POISON
        ax.add_patch(patches.Rectangle((x, -y), 1, -1, facecolor="whitesmoke" if poisoned else "white",
                                       edgecolor="gray", linewidth=0.5))
        ax.text(x + 0.5, -y - 0.5, "·" if poisoned else _short(v), ha="center", va="center", fontsize=6)
    ax.set_xlim(-0.1, g.shape[1] + 0.1)
    ax.set_ylim(-g.shape[0] - 0.1, 0.1)
    ax.set_aspect("equal")
    ax.set_title(name, fontsize=8, loc="left")


def _short(v) -> str:
    text = f"{v:g}" if isinstance(v, (float, np.floating)) else str(v)
    return text if len(text) <= 6 else text[:5] + "…"
