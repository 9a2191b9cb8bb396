"""What one simulated launch touched: every global and shared element access, its line and barrier interval.

A ``Trace`` holds the ``Access`` records of one launch in Numba's CUDA simulator. Each access
names the array (an argument's name, or the variable a ``cuda.shared.array`` was assigned to),
the flat element index of that array (C order), the simulated thread (block, thread, warp), the
kind (``read``, ``write`` or ``atomic``), the line of the kernel that made it (``Where``: file,
line number, function, text) and the thread's barrier interval: how many ``cuda.syncthreads()``
(or ``syncthreads_count/and/or``) the thread had passed. ``BarrierRound`` records which barrier
call sites a block's threads waited at, round by round.

``RecordingArray`` is what the kernel sees instead of a NumPy array: element reads and writes are
logged, row views and slices (``row = tags[r]; row[s]``, ``a[1:5]``) map back to the flat index of
the array they came from, and an index past the end is logged as out of bounds and *not* performed
(a read gives 0). ``RecordingShared`` and ``RecordingAtomic`` stand in for the simulator's
``cuda.shared`` and ``cuda.atomic`` so that shared arrays are recorded and an atomic update is one
``atomic`` access. What the recorder cannot follow raises ``RecorderLimit``, which says so.

``simsched`` runs the launch; ``threadviz`` draws a trace; ``racecheck`` finds races in it.
"""

from __future__ import annotations

import io
import linecache
import os
import re
import sys
import threading
import tokenize
from dataclasses import dataclass, field

import numpy as np


class RecorderLimit(Exception):
    """The recorder cannot follow something the kernel does: a limit of the recorder, not a bug."""


def cannot_follow(what: str) -> RecorderLimit:
    return RecorderLimit(f"the thread recorder cannot follow {what}: this is a limit of the recorder, "
                         "not an error in your kernel (run the kernel without the recorder to check it)")


@dataclass(frozen=True)
class Where:
    """A line of kernel source: ``file``, ``line`` (cell-relative in a notebook), ``function``, ``text``."""

    file: str
    line: int
    function: str
    text: str

    def at(self, home: str = "") -> str:
        """``line 9``; ``line 9 in `find_slot_dev``` when the line is not in function ``home``; ``... of
        blockscan.py`` when it is the package's code (a puzzle's own kernel around the learner's function)."""
        inside = f" in `{self.function}`" if home and self.function != home else ""
        package = f" of {os.path.basename(self.file)}" if os.path.abspath(self.file).startswith(_PACKAGE_DIR) else ""
        return f"line {self.line}{inside}{package}"

    def quoted(self, home: str = "") -> str:
        """``line 9 (`x = s[t - 1]`)``: the line and its text."""
        return f"{self.at(home)} (`{self.text}`)" if self.text else self.at(home)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
UNKNOWN = Where("?", 0, "?", "")
MAX_ACCESSES = 1_000_000          # a launch that touches more is stopped (a puzzle's touches thousands)
_INFRA_FILES = {os.path.abspath(__file__), os.path.abspath(threading.__file__)}
_INFRA_DIRS: list = []
_IS_INFRA: dict = {}              # co_filename -> whether its frames are the recorder's or the simulator's
_WHERE: dict = {}


def infrastructure(*files: str, dirs=()) -> None:
    """Files and folders whose frames are the recorder's or the simulator's, never the kernel's."""
    _INFRA_FILES.update(os.path.abspath(f) for f in files)
    for d in dirs:
        d = os.path.abspath(d) + os.sep
        if d not in _INFRA_DIRS:
            _INFRA_DIRS.append(d)
    _IS_INFRA.clear()


def _is_infra(filename: str) -> bool:
    known = _IS_INFRA.get(filename)
    if known is None:
        path = os.path.abspath(filename)
        known = _IS_INFRA[filename] = path in _INFRA_FILES or path.startswith(tuple(_INFRA_DIRS))
    return known


def learner_frame():
    """The innermost frame of kernel code on the calling thread's stack (recorder frames skipped)."""
    f = sys._getframe(1)
    while f is not None and _is_infra(f.f_code.co_filename):
        f = f.f_back
    return f


def where_of(f) -> Where:
    if f is None:
        return UNKNOWN
    key = (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
    where = _WHERE.get(key)
    if where is None:
        where = _WHERE[key] = Where(key[0], key[1], key[2], _code(linecache.getline(key[0], key[1])))
    return where


def learner_where() -> Where:
    """The innermost line of kernel code on the calling thread's stack."""
    return where_of(learner_frame())


def caller_of(f) -> Where | None:
    """The kernel's own line that led to frame ``f`` (the outermost kernel code frame), ``None``
    when ``f`` is that frame."""
    outer, g = None, f.f_back if f is not None else None
    while g is not None:
        if not _is_infra(g.f_code.co_filename):
            outer = g
        g = g.f_back
    return where_of(outer) if outer is not None else None


def _code(line: str) -> str:
    """A source line without its comment and surrounding blanks."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):
        return line.strip()
    comment = next((t for t in tokens if t.type == tokenize.COMMENT), None)
    return (line[:comment.start[1]] if comment else line).strip()


@dataclass(frozen=True)
class Access:
    """One read, write or atomic update: ``block``/``thread`` are ``(x, y, z)``; ``index`` is the flat element.

    ``space`` is ``global`` (an argument) or ``shared``; ``where`` the kernel line; ``interval`` the
    number of barriers the thread had passed; ``seq`` the thread's own access count; ``op`` the
    atomic's name (``add``, ``max``, ...); ``run`` counts the thread's executions of
    the line since its last barrier (1 for the first: in a loop, the round); ``via`` the
    kernel's line that called the device function ``where`` is in (``None`` in the kernel itself)."""

    buffer: str
    kind: str          # "read", "write" or "atomic"
    block: tuple
    thread: tuple
    warp: int
    index: int
    in_bounds: bool
    space: str = "global"
    where: Where = UNKNOWN
    interval: int = 0
    seq: int = 0
    op: str = ""
    run: int = 1
    via: Where | None = None

    @property
    def who(self) -> str:
        """The thread as lessons print it: ``(block.x, thread.x)``."""
        return f"({self.block[0]}, {self.thread[0]})"

    @property
    def line(self) -> int:
        return self.where.line


@dataclass(frozen=True)
class BarrierRound:
    """Round ``number`` of ``block``: the threads that waited at each barrier call site and those that returned.

    ``arrived`` maps ``(kind, Where, via)`` (kind: ``syncthreads``, ``syncthreads_count``, ...; via:
    the kernel line that called the device function with the barrier, or ``None``) to the
    ``(x, y, z)`` thread indices that waited there; ``total`` is the block's thread count."""

    block: tuple
    number: int
    arrived: dict
    exited: tuple
    total: int


@dataclass
class Trace:
    """Every access of one launch, the arrays recorded (by name) and the barrier rounds of each block."""

    grid: tuple
    block: tuple
    arrays: dict = field(default_factory=dict)
    accesses: list = field(default_factory=list)
    shared: dict = field(default_factory=dict)          # shared array name -> Where it was allocated
    barriers: list = field(default_factory=list)        # BarrierRound, in the order they ended
    kernel: str = ""                                    # the kernel function's name
    order: str = "forward"                              # the thread order it ran in (simsched.Order)
    free_rounds: int = 0                                # rounds whose threads ran together, order not kept
    stopped: bool = False                               # set when the recorder aborts the launch

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

    def space(self, buffer: str) -> str:
        return "shared" if buffer in self.shared else "global"

    def intervals(self, buffer: str | None = None) -> list:
        """The barrier intervals in which ``buffer`` (default: any array) was touched, ascending."""
        return sorted({a.interval for a in self.accesses if buffer is None or a.buffer == buffer})

    def barrier_lines(self) -> dict:
        """``{interval: [Where]}``: the barrier call site(s) that end each interval (first block's)."""
        out: dict = {}
        first = self.barriers[0].block if self.barriers else None
        for r in self.barriers:
            if r.block == first:
                out[r.number] = [where for _, where, _ in r.arrived]
        return out


class _Base:
    """The recorded NumPy array behind a ``RecordingArray`` and all its views."""

    __slots__ = ("array", "name", "trace", "space", "flat")

    def __init__(self, array, name, trace, space):
        self.array, self.name, self.trace, self.space = array, name, trace, space
        self.flat = array.reshape(-1) if array.flags.c_contiguous else None   # a view, never a copy

    def load(self, flat):
        return self.flat[flat] if self.flat is not None else self.array[self.index(flat)]

    def store(self, flat, value):
        if self.flat is not None:
            self.flat[flat] = value
        else:
            self.array[self.index(flat)] = value

    def index(self, flat) -> tuple:
        return tuple(int(i) for i in np.unravel_index(flat, self.array.shape))


def _c_strides(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


class RecordingArray:
    """A NumPy array seen by a simulated kernel, logging each element access to a ``Trace``.

    A view (``a[r]`` of a 2-D array, ``a[1:5]``) is a ``RecordingArray`` too: ``offset`` and
    ``strides`` (in elements) map its indices to the flat index of the recorded array."""

    def __init__(self, array: np.ndarray, name: str, trace: Trace, space: str = "global"):
        self._view(_Base(array, name, trace, space), 0, array.shape, _c_strides(array.shape), True)

    def _view(self, base, offset, shape, strides, valid):
        self._b, self._offset, self._strides, self._valid = base, offset, tuple(strides), valid
        self.name, self.dtype = base.name, base.array.dtype
        self.shape, self.ndim, self.size = tuple(shape), len(shape), int(np.prod(shape, dtype=np.int64))
        return self

    @property
    def strides(self) -> tuple:
        return tuple(s * self.dtype.itemsize for s in self._strides)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self):
        return self.shape[0]

    def __iter__(self):
        for i in range(self.shape[0]):
            yield self[i]

    def __repr__(self):
        return f"<recorded {self._b.space} array {self.name} {list(self.shape)} {self.dtype}>"

    def __getattr__(self, attr):
        if attr.startswith("__") or not hasattr(np.ndarray, attr):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")
        raise cannot_follow(f"`{self.name}.{attr}` (only element access, views, slices, shape, size, "
                            "ndim, dtype, strides, itemsize and nbytes are recorded)")

    def _select(self, key):
        """``(flat offset, shape, strides, in bounds)`` of ``self[key]``: an element when shape is ``()``."""
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1:]
        if len(key) > self.ndim:
            raise IndexError(f"{self.name}[{_show(key)}]: {len(key)} indices for a {self.ndim}-D array")
        key = key + (slice(None),) * (self.ndim - len(key))
        offset, valid, shape, strides = self._offset, self._valid, [], []
        for k, n, step in zip(key, self.shape, self._strides):
            if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                valid = valid and 0 <= int(k) < n
                offset += int(k) * step
            elif isinstance(k, slice):
                start, stop, stride = k.indices(n)
                shape.append(len(range(start, stop, stride)))
                strides.append(stride * step)
                offset += start * step
            elif isinstance(k, (float, np.floating)):
                raise TypeError(f"{self.name}[{_show(key)}]: an array index must be an integer, not "
                                f"{type(k).__name__} (Numba does not compile a float index)")
            else:
                raise cannot_follow(f"the index {self.name}[{_show(key)}] (a {type(k).__name__}: only integers "
                                    "and slices are recorded)")
        return offset, tuple(shape), tuple(strides), valid

    def _log(self, kind, flat, ok, op=""):
        b = self._b
        if b.trace.stopped:
            raise RuntimeError("the recorder stopped this launch")
        t = threading.current_thread()
        f = learner_frame()
        where = where_of(f)
        runs = t.__dict__.setdefault("runs", {})
        last = getattr(t, "last_access", None)      # (frame, line, bytecode offset) of its last access
        if last is None or last[0] is not f or last[1] != where.line or f.f_lasti <= last[2]:
            runs[where] = runs.get(where, 0) + 1    # not the same execution of the line: a new one
        t.last_access = (f, where.line, f.f_lasti)
        t.seq = getattr(t, "seq", 0) + 1
        if len(b.trace.accesses) >= MAX_ACCESSES:
            b.trace.stopped = True
            raise cannot_follow(f"a launch of more than {MAX_ACCESSES} element accesses (does a loop never end?)")
        b.trace.accesses.append(Access(b.name, kind, tuple(t.blockIdx), tuple(t.threadIdx), t.thread_id // 32,
                                       flat, ok, b.space, where, getattr(t, "interval", 0), t.seq, op,
                                       runs[where], caller_of(f)))

    def __getitem__(self, key):
        flat, shape, strides, ok = self._select(key)
        if shape:
            return RecordingArray.__new__(RecordingArray)._view(self._b, flat, shape, strides, ok)
        self._log("read", flat, ok)
        return self._b.load(flat) if ok else self.dtype.type(0)

    def __setitem__(self, key, value):
        flat, shape, strides, ok = self._select(key)
        if not shape:
            self._log("write", flat, ok)
            if ok:
                self._b.store(flat, value)
            return
        view = RecordingArray.__new__(RecordingArray)._view(self._b, flat, shape, strides, ok)
        whole = isinstance(value, (np.ndarray, RecordingArray)) and value.ndim > 0
        if whole and tuple(value.shape) != shape:
            raise cannot_follow(f"the assignment {self.name}[{_show(key)}] = an array of shape "
                                f"{tuple(value.shape)} (only same-shape or scalar assignments are recorded)")
        for idx in np.ndindex(*shape):
            view[idx] = value[idx] if whole else value

    def _atomic(self, op, key, apply):
        """``apply(recorded array, its index)`` as one atomic access to ``self[key]``; returns the old value."""
        flat, shape, _, ok = self._select(key)
        if shape:
            raise cannot_follow(f"cuda.atomic.{op} on a slice of {self.name} (one element at a time is recorded)")
        self._log("atomic", flat, ok, op)
        return apply(self._b.array, self._b.index(flat)) if ok else self.dtype.type(0)


def _show(key) -> str:
    def one(k):
        if isinstance(k, slice):
            return ":".join("" if v is None else str(v) for v in (k.start, k.stop)) + \
                (f":{k.step}" if k.step is not None else "")
        return repr(k) if not isinstance(k, (int, np.integer)) else str(int(k))
    return ", ".join(one(k) for k in key)


GARBAGE_BYTE = 0xA5      # every byte of a new shared array: uninitialised, but the same on every run
_SHARED_NAME = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?=\s*[\w.]*shared\.array\s*\(")


class RecordingShared:
    """Stands in for the simulator's ``cuda.shared``: each ``cuda.shared.array`` call site gets one
    recorded array per launch (as in the simulator: blocks run one after another and share it),
    named after the variable it is assigned to, its bytes ``GARBAGE_BYTE`` until written."""

    def __init__(self, inner, trace: Trace):
        self._inner, self._trace, self._sites = inner, trace, {}
        self._lock = threading.Lock()   # threads of a free round may reach a new line together

    def array(self, shape, dtype, alignment=None):
        where = learner_where()
        with self._lock:
            return self._site_array(where, shape, dtype, alignment)

    def _site_array(self, where, shape, dtype, alignment):
        rec = self._sites.get((where.file, where.line))
        if rec is None:
            if shape == 0:           # dynamic shared memory: every such array is the launch's one buffer
                raw = self._inner.array(shape, dtype, alignment)
            else:                    # a fresh simulator allocator: it keys allocations by its caller's line
                raw = type(self._inner)(0).array(shape, dtype, alignment)
                raw.reshape(-1).view(np.uint8)[:] = GARBAGE_BYTE
            name = self._name(where, raw)
            self._trace.arrays[name], self._trace.shared[name] = raw, where
            rec = self._sites[(where.file, where.line)] = RecordingArray(raw, name, self._trace, "shared")
        return rec

    def _name(self, where: Where, raw: np.ndarray) -> str:
        m = _SHARED_NAME.match(where.text)
        if m and m.group(1) not in self._trace.arrays:
            return m.group(1)
        if m:
            return f"{m.group(1)} (line {where.line})"
        return f"shared array #{len(self._trace.shared) + 1} ({raw.dtype}[{', '.join(map(str, raw.shape))}])"

    def __getattr__(self, attr):
        return getattr(self._inner, attr)


class RecordingAtomic:
    """Stands in for the simulator's ``cuda.atomic``: on a recorded array an update is one ``atomic`` access."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, op):
        fn = getattr(self._inner, op)
        if op == "compare_and_swap":          # cas on element 0
            cas = self._inner.cas

            def call(array, old, val):
                if not isinstance(array, RecordingArray):
                    return fn(array, old, val)
                return array._atomic(op, (0,) * array.ndim, lambda raw, idx: cas(raw, idx, old, val))
            return call

        def call(array, index, *vals):
            if not isinstance(array, RecordingArray):
                return fn(array, index, *vals)
            return array._atomic(op, index, lambda raw, idx: fn(raw, idx, *vals))
        return call
