"""Which thread touched which element: record one kernel launch in the simulator and draw it.

``record(kernel, grid, block, *args)`` launches ``kernel`` with every array argument wrapped in a
``RecordingArray`` and every ``cuda.shared.array`` recorded too (``simsched`` runs the launch,
``simtrace`` holds what it recorded): each read, write and atomic update is logged with the
simulated thread that did it (block index, thread index, warp), the kernel line that did it and
the thread's barrier interval (how many ``cuda.syncthreads()`` it had passed). Row views and
slices map back to the element of the array they came from. An index outside the array is
logged as out of bounds and *not* performed (a read gives 0), so one wrong kernel draws a whole
picture instead of stopping at the first ``IndexError``. ``draw(trace)`` makes a GPU-Puzzles-style
figure: one grid per buffer, reads and writes side by side, each cell labelled with the thread
that touched it, out-of-bounds attempts in red below the grid; ``by_interval=True`` gives each
barrier interval its own row. ``show(kernel, grid, block, *args)`` records and draws in one call.

Only the simulator runs kernels as Python, so only it can record. On a GPU ``record`` and
``show`` launch the kernel normally, say that the picture needs the simulator, and return ``None``.

Used by lesson 00 (grid, block, thread, warp), by the kernel puzzles of lessons 14 and 15
(``ex14``), and by ``racecheck``.
"""

from __future__ import annotations

import numpy as np

from .. import device
from .simsched import record_launch
from .simtrace import Access, BarrierRound, RecorderLimit, RecordingArray, Trace, Where

__all__ = ["Access", "BarrierRound", "RecorderLimit", "RecordingArray", "Trace", "Where", "chunk_of", "draw",
           "record", "show", "thread_colour"]


def record(kernel, grid, block, *args, names=None):
    """Launch ``kernel[grid, block](*args)`` and return its ``Trace`` (``None`` on a GPU).

    NumPy array arguments are recorded in place (the kernel's writes land in them); ``names``
    gives their labels, in order (default: the kernel's parameter names). Scalars pass through.
    The block's threads run one at a time between barriers, in index order (``simsched``).
    """
    if not device.SIMULATOR:
        print("(the thread picture needs the CUDA simulator: NUMBA_ENABLE_CUDASIM=1; "
              "the kernel ran normally on the GPU)")
        device.launch(kernel, grid, block, *args)
        device.synchronize()
        return None
    return record_launch(kernel, grid, block, args, names)


def chunk_of(trace: Trace, access: Access) -> int:
    """The 16-byte chunk of its buffer that ``access`` falls in."""
    return access.index * trace.arrays[access.buffer].itemsize // 16


def _linear(index: tuple, dims: tuple) -> int:
    return index[0] + dims[0] * (index[1] + dims[1] * index[2])


def _label(access: Access, trace: Trace) -> tuple:
    """``(block, thread)`` as single numbers (x first), for cell labels."""
    return _linear(access.block, trace.grid), _linear(access.thread, trace.block)


def thread_colour(access: Access, trace: Trace):
    """One colour per thread of the launch (tab20 for up to 20 threads, else a gradient)."""
    import matplotlib.pyplot as plt

    b, t = _label(access, trace)
    per_block = trace.block[0] * trace.block[1] * trace.block[2]
    total = max(trace.grid[0] * trace.grid[1] * trace.grid[2] * per_block, 1)
    if total <= 20:
        return plt.get_cmap("tab20")(b * per_block + t)
    return plt.get_cmap("viridis")((b * per_block + t) / total)


KINDS = ("read", "write", "atomic")
WHAT = {"read": "reads", "write": "writes", "atomic": "atomic updates", "expected": "the reference changes (grey)"}


def draw(trace: Trace | None, buffers=None, *, cols: int | None = None, title: str = "",
         highlight=(), expected=None, by_interval: bool = False):
    """A row of panels per buffer: its reads, its writes, its atomic updates (cells labelled ``block,thread``).

    ``buffers``: names to draw (default all, shared arrays after the arguments). ``cols``: cells
    per grid row (default: the array's last dimension, or 16 for 1-D). ``highlight``: ``(buffer,
    flat index)`` pairs outlined in red (the checker's "look here"; cells written by two threads
    are outlined too). ``expected``: ``{buffer: bool mask}`` of the elements the reference
    changes, drawn as another panel. ``by_interval``: one row of panels per buffer and barrier
    interval (the accesses between two ``cuda.syncthreads()``), so a cell written by two threads
    is a race. Returns the figure (``None`` without a trace).
    """
    if trace is None:
        return None
    import matplotlib.pyplot as plt

    expected = expected or {}
    rows = []
    for name in list(buffers or trace.arrays):
        accesses = trace.of(name)
        for n, interval in enumerate((trace.intervals(name) or [0]) if by_interval else [None]):
            kinds = [k for k in KINDS if any(a.kind == k and interval in (None, a.interval) for a in accesses)]
            rows.append((name, interval, (kinds or ["read"]) + (["expected"] if name in expected and n == 0 else [])))
    ncols = max(len(k) for _, _, k in rows)
    height = 0.8 + sum(0.7 + 0.35 * (_grid_rows(trace.arrays[n], cols) + 1.3 * bool(trace.of(n, in_bounds=False)))
                       for n, _, _ in rows)
    fig, axes = plt.subplots(len(rows), ncols, figsize=(max(9.0, 4.5 * ncols), height), squeeze=False)
    hl = set(highlight)
    barriers = trace.barrier_lines() if by_interval else {}
    for r, (name, interval, kinds) in enumerate(rows):
        for c in range(ncols):
            ax = axes[r][c]
            ax.axis("off")
            if c < len(kinds):
                _panel(ax, trace, name, kinds[c], cols, hl, expected.get(name), interval)
                if interval is not None and kinds[c] != "expected":
                    ax.set_title(ax.get_title() + "\n" + _interval_words(interval, barriers), fontsize=8)
    grid = "x".join(str(d) for d in trace.grid if d > 1) or "1"
    block = "x".join(str(d) for d in trace.block if d > 1) or "1"
    fig.suptitle(title or f"who touched what: {grid} block(s) x {block} threads (cell label: block,thread)"
                 + ("; one row per barrier interval" if by_interval else ""), fontsize=10)
    fig.tight_layout()
    return fig


def _interval_words(interval: int, barriers: dict) -> str:
    if interval == 0:
        return "interval 0: before the first barrier"
    lines = sorted({w.line for w in barriers.get(interval - 1, [])})
    at = f" (line {', '.join(map(str, lines))})" if lines else ""
    return f"interval {interval}: after barrier {interval}{at}"


def _panel(ax, trace, name, kind, cols, hl, mask, interval=None):
    import matplotlib.patches as patches

    arr = trace.arrays[name]
    width = cols or (arr.shape[-1] if arr.ndim > 1 else min(arr.size, 16))
    nrows = _grid_rows(arr, cols)
    cells: dict = {}
    oob: dict = {}
    if kind != "expected":
        for a in trace.of(name, kind):
            if interval is None or a.interval == interval:
                (cells if a.in_bounds else oob).setdefault(a.index, []).append(a)
    for i in range(arr.size):
        y, x = divmod(i, width)
        if kind == "expected":
            acc, face = [], ("silver" if mask.reshape(-1)[i] else "white")
        else:
            acc = cells.get(i, [])
            face = thread_colour(acc[0], trace) if acc else "white"
        twice = kind == "write" and len({(a.block, a.thread) for a in acc}) > 1
        red = (name, i) in hl or twice
        ax.add_patch(patches.Rectangle((x, -y), 1, -1, facecolor=face, edgecolor="red" if red else "gray",
                                       linewidth=2 if red else 0.5, alpha=0.85))
        if acc:
            who = sorted({_label(a, trace) for a in acc})
            label = "\n".join(f"{b},{t}" for b, t in who) if len(who) <= 2 else \
                f"{who[0][0]},{who[0][1]}..\n{who[-1][0]},{who[-1][1]}\n({len(who)})"
            ax.text(x + 0.5, -y - 0.5, label, ha="center", va="center", fontsize=6)
    past = sorted(oob)
    for j, i in enumerate(past[:width]):
        b, t = _label(oob[i][0], trace)
        ax.add_patch(patches.Rectangle((j, -nrows - 0.3), 1, -1, facecolor="mistyrose", edgecolor="red",
                                       linewidth=1.5))
        ax.text(j + 0.5, -nrows - 0.8, f"{b},{t}\n@{i}", ha="center", va="center", fontsize=6, color="darkred")
    ax.set_xlim(-0.1, width + 0.1)
    ax.set_ylim(-nrows - (1.5 if past else 0.1), 0.1)
    ax.set_aspect("equal")
    extra = f"; {len(past)} past the end (red, @index)" if past else ""
    space = " shared" if name in trace.shared else ""
    ax.set_title(f"{name}{space} {list(arr.shape)} {arr.dtype}: {WHAT[kind]}{extra}", fontsize=8)


def _grid_rows(arr: np.ndarray, cols) -> int:
    width = cols or (arr.shape[-1] if arr.ndim > 1 else min(arr.size, 16))
    return -(-arr.size // max(width, 1))


def show(kernel, grid, block, *args, names=None, buffers=None, cols: int | None = None, title: str = ""):
    """``record`` the launch and draw it by barrier interval (global and shared arrays, reads, writes,
    atomic updates, attempts past the end); returns the ``Trace`` (``None`` on a GPU, as ``record``)."""
    trace = record(kernel, grid, block, *args, names=names)
    if trace is not None:
        import matplotlib.pyplot as plt

        draw(trace, buffers, cols=cols, title=title, by_interval=bool(trace.barriers))
        plt.show()
    return trace
