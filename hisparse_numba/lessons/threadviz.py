"""Which thread touched which element: record one kernel launch in the simulator and draw it.

``record(kernel, grid, block, *args)`` launches ``kernel`` with every array argument wrapped in a
``RecordingArray``: each read and write is logged with the simulated thread that did it (block
index, thread index, warp), taken from the simulator's current Python thread. An index outside
the array is logged as out of bounds and *not* performed (a read gives 0), so one wrong kernel
draws a whole picture instead of stopping at the first ``IndexError``. ``draw(trace)`` makes a
GPU-Puzzles-style figure: one grid per buffer, reads and writes side by side, each cell labelled
with the thread that touched it, out-of-bounds attempts in red below the grid.

Only the simulator runs kernels as Python, so only it can record. On a GPU ``record`` launches
the kernel normally, says that the picture needs the simulator, and returns ``None``.

Used by lesson 00 (grid, block, thread, warp) and by the kernel puzzles of lesson 14 (``ex14``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from .. import device


@dataclass(frozen=True)
class Access:
    """One read or write: ``block``/``thread`` are ``(x, y, z)``; ``index`` is the flat element."""

    buffer: str
    kind: str          # "read" or "write"
    block: tuple
    thread: tuple
    warp: int
    index: int
    in_bounds: bool

    @property
    def who(self) -> str:
        """The thread as lessons print it: ``(block.x, thread.x)``."""
        return f"({self.block[0]}, {self.thread[0]})"


@dataclass
class Trace:
    """Every access of one launch, and the arrays that were recorded (by name)."""

    grid: tuple
    block: tuple
    arrays: dict = field(default_factory=dict)
    accesses: list = field(default_factory=list)

    def of(self, buffer: str, kind: str | None = None, in_bounds: bool | None = None) -> list:
        return [a for a in self.accesses if a.buffer == buffer and (kind is None or a.kind == kind)
                and (in_bounds is None or a.in_bounds == in_bounds)]

    def out_of_bounds(self) -> list:
        return [a for a in self.accesses if not a.in_bounds]

    def writers(self, buffer: str) -> dict:
        """``{flat index: [accesses]}`` of the in-bounds writes to ``buffer``."""
        out: dict = {}
        for a in self.of(buffer, "write", True):
            out.setdefault(a.index, []).append(a)
        return out


class RecordingArray:
    """A NumPy array seen by a simulated kernel, logging each element access to a ``Trace``."""

    def __init__(self, array: np.ndarray, name: str, trace: Trace):
        self._a, self.name, self._trace = array, name, trace
        self.shape, self.ndim, self.size, self.dtype = array.shape, array.ndim, array.size, array.dtype
        self._lock = threading.Lock()

    def __len__(self):
        return self.shape[0]

    def _flat(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != self.ndim or not all(isinstance(k, (int, np.integer)) for k in key):
            raise TypeError(f"{self.name}[{key}]: index with {self.ndim} integer(s) (the picture "
                            "records single elements)")
        key = tuple(int(k) for k in key)
        ok = all(0 <= k < n for k, n in zip(key, self.shape))
        flat = int(np.ravel_multi_index(key, self.shape)) if ok else _flat_unchecked(key, self.shape)
        return key, flat, ok

    def _log(self, kind, flat, ok):
        t = threading.current_thread()
        acc = Access(self.name, kind, tuple(t.blockIdx), tuple(t.threadIdx), t.thread_id // 32, flat, ok)
        with self._lock:
            self._trace.accesses.append(acc)

    def __getitem__(self, key):
        key, flat, ok = self._flat(key)
        self._log("read", flat, ok)
        return self._a[key] if ok else self.dtype.type(0)

    def __setitem__(self, key, value):
        key, flat, ok = self._flat(key)
        self._log("write", flat, ok)
        if ok:
            self._a[key] = value


def _flat_unchecked(key, shape) -> int:
    flat = 0
    for k, n in zip(key, shape):
        flat = flat * n + k
    return flat


def _dims(d) -> tuple:
    d = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    return d + (1,) * (3 - len(d))


def record(kernel, grid, block, *args, names=None):
    """Launch ``kernel[grid, block](*args)`` and return its ``Trace`` (``None`` on a GPU).

    NumPy array arguments are recorded in place (the kernel's writes land in them); ``names``
    gives their labels, in order (default ``arg0, arg1, ...``). Scalars pass through.
    """
    if not device.SIMULATOR:
        print("(the thread picture needs the CUDA simulator: NUMBA_ENABLE_CUDASIM=1; "
              "the kernel ran normally on the GPU)")
        device.launch(kernel, grid, block, *args)
        device.synchronize()
        return None
    trace = Trace(_dims(grid), _dims(block))
    wrapped, k = [], 0
    for a in args:
        if isinstance(a, np.ndarray) and a.ndim > 0:
            name = names[k] if names and k < len(names) else f"arg{k}"
            k += 1
            trace.arrays[name] = a
            wrapped.append(RecordingArray(a, name, trace))
        else:
            wrapped.append(a)
    device.run_simulated(kernel, grid, block, wrapped)
    return trace


def chunk_of(trace: Trace, access: Access) -> int:
    """The 16-byte chunk of its buffer that ``access`` falls in."""
    return access.index * trace.arrays[access.buffer].itemsize // 16


def thread_colour(access: Access, trace: Trace):
    """One colour per thread of the launch (tab20 for up to 20 threads, else a gradient)."""
    import matplotlib.pyplot as plt

    linear = access.block[0] * trace.block[0] + access.thread[0]
    total = max(trace.grid[0] * trace.block[0], 1)
    if total <= 20:
        return plt.get_cmap("tab20")(linear)
    return plt.get_cmap("viridis")(linear / total)


def draw(trace: Trace | None, buffers=None, *, cols: int | None = None, title: str = "",
         highlight=(), expected=None):
    """A row of panels per buffer: its reads, its writes (each cell labelled ``block,thread``).

    ``buffers``: names to draw (default all). ``cols``: cells per grid row (default: the array's
    last dimension, or 16 for 1-D). ``highlight``: ``(buffer, flat index)`` pairs outlined in red
    (the checker's "look here"; cells written by two threads are outlined too). ``expected``:
    ``{buffer: bool mask}`` of the elements the reference changes, drawn as a third panel.
    Returns the figure (``None`` without a trace).
    """
    if trace is None:
        return None
    import matplotlib.pyplot as plt

    names = list(buffers or trace.arrays)
    expected = expected or {}
    rows = []
    for name in names:
        kinds = [k for k in ("read", "write") if trace.of(name, k)] + (["expected"] if name in expected else [])
        rows.append((name, kinds or ["read"]))
    ncols = max(len(k) for _, k in rows)
    height = 0.8 + sum(0.7 + 0.35 * (_grid_rows(trace.arrays[n], cols) + 1.3 * bool(trace.of(n, in_bounds=False)))
                       for n in names)
    fig, axes = plt.subplots(len(rows), ncols, figsize=(max(9.0, 4.5 * ncols), height), squeeze=False)
    hl = set(highlight)
    for r, (name, kinds) in enumerate(rows):
        for c in range(ncols):
            ax = axes[r][c]
            ax.axis("off")
            if c < len(kinds):
                _panel(ax, trace, name, kinds[c], cols, hl, expected.get(name))
    fig.suptitle(title or f"who touched what: {trace.grid[0]} block(s) x {trace.block[0]} threads "
                 "(cell label: block,thread)", fontsize=10)
    fig.tight_layout()
    return fig


def _panel(ax, trace, name, kind, cols, hl, mask):
    import matplotlib.patches as patches

    arr = trace.arrays[name]
    width = cols or (arr.shape[-1] if arr.ndim > 1 else min(arr.size, 16))
    nrows = _grid_rows(arr, cols)
    cells: dict = {}
    for a in trace.of(name, None if kind == "expected" else kind):
        cells.setdefault(a.index, []).append(a)
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
            who = sorted({(a.block[0], a.thread[0]) for a in acc})
            label = "\n".join(f"{b},{t}" for b, t in who) if len(who) <= 2 else \
                f"{who[0][0]},{who[0][1]}..\n{who[-1][0]},{who[-1][1]}\n({len(who)})"
            ax.text(x + 0.5, -y - 0.5, label, ha="center", va="center", fontsize=6)
    oob = sorted(i for i in cells if not (0 <= i < arr.size)) if kind != "expected" else []
    for j, i in enumerate(oob[:width]):
        a = cells[i][0]
        ax.add_patch(patches.Rectangle((j, -nrows - 0.3), 1, -1, facecolor="mistyrose", edgecolor="red",
                                       linewidth=1.5))
        ax.text(j + 0.5, -nrows - 0.8, f"{a.block[0]},{a.thread[0]}\n@{i}", ha="center", va="center",
                fontsize=6, color="darkred")
    ax.set_xlim(-0.1, width + 0.1)
    ax.set_ylim(-nrows - (1.5 if oob else 0.1), 0.1)
    ax.set_aspect("equal")
    what = {"read": "reads", "write": "writes", "expected": "the reference changes (grey)"}[kind]
    extra = f"; {len(oob)} past the end (red, @index)" if oob else ""
    ax.set_title(f"{name} {list(arr.shape)} {arr.dtype}: {what}{extra}", fontsize=8)


def _grid_rows(arr: np.ndarray, cols) -> int:
    width = cols or (arr.shape[-1] if arr.ndim > 1 else min(arr.size, 16))
    return -(-arr.size // max(width, 1))
