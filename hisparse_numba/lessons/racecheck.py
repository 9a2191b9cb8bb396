"""Data races and barrier divergence of one launch, named at the kernel's lines (CUDA simulator only).

``run(kernel, grid, block, *args)`` launches the kernel in the simulator with every global and
shared access recorded (``simsched``, ``simtrace``) and returns a ``Report``:

* a **race** (HiRace/GPUVerify style, by barrier intervals): two accesses to one element of one
  array by different threads, at least one of them a write, that nothing orders: in one block,
  both in the same barrier interval (the threads had passed as many ``cuda.syncthreads()``); for
  global memory also any two threads of different blocks, which no barrier orders. An atomic
  update conflicts with plain reads and writes but never with another atomic. Each race is
  reported once per array and pair of lines, with the line to put a barrier after.
* a **divergent barrier**: a ``cuda.syncthreads()`` (``_count/_and/_or``) that only some threads
  of a block reach, because it sits in a branch or others returned first.
* an **uninitialised shared read**: a thread reads (or atomically updates) a shared element that
  no thread of its block has written before it: shared memory starts as garbage.

``Report.ok`` is true when none of the three was found. ``Report.messages()`` says each in a
sentence that names the threads, the element, the lines (with their text) and the fix.

Race detection reads the recorded accesses, not timings, so a racy kernel is reported on every
run. ``orders=`` runs the launch several times from the same inputs, the threads of each round in
another order (``simsched.Order``: forward, reverse, seeded shuffles): a race that changes the
result shows in ``Report.differences``. The arrays end with the first order's results.

On a GPU the kernel runs normally and the report says that the check needs the simulator
(``ok`` is ``None``). Used by the kernel puzzles of lessons 14 and 15.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .. import device
from . import simsched, threadviz
from .simtrace import Access, Trace, Where

NEEDS_SIMULATOR = ("the race check needs the CUDA simulator (NUMBA_ENABLE_CUDASIM=1): the kernel ran "
                   "normally on the GPU, unchecked")


@dataclass(frozen=True)
class Race:
    """``first`` and ``second`` touched ``array[index]`` (flat) with nothing ordering them (the first
    such element of the two lines; ``elements`` lists them all)."""

    array: str
    index: int
    first: Access
    second: Access
    message: str
    elements: tuple = ()        # every flat index of ``array`` raced on by the same two lines


@dataclass(frozen=True)
class Divergence:
    """The barrier at ``line`` (``where``) was reached by ``reached`` of the ``total`` threads of ``block``."""

    line: int
    reached: int
    total: int
    block: tuple
    message: str
    where: Where
    kind: str = "syncthreads"
    via: Where | None = None    # the kernel line that called the device function holding the barrier
    after: tuple = ()           # the lines of the barriers right after it that the same threads reached


@dataclass(frozen=True)
class Uninitialised:
    """``access`` read (or atomically updated) shared ``array[index]`` before any thread of its block wrote it."""

    array: str
    index: int
    access: Access
    message: str


@dataclass
class Report:
    """What ``run`` found. ``outcomes``: order name -> {argument array name: its final values}."""

    races: list
    divergence: list
    trace: Trace | None
    ok: bool | None
    note: str = ""
    uninitialised: list = field(default_factory=list)
    outcomes: dict = field(default_factory=dict)
    differences: list = field(default_factory=list)

    def messages(self) -> list:
        """The races' sentences, then the divergent barriers', the uninitialised shared reads', then
        (when any) how the result changed with the thread order. Empty when the check could not run
        (``ok is None``)."""
        if self.ok is None:
            return []
        found = [r.message for r in self.races] + [d.message for d in self.divergence] + \
            [u.message for u in self.uninitialised]
        return found + (self.differences if found else [])

    def draw(self, buffers=None, **kwargs):
        """``threadviz.draw`` of the trace by barrier interval, the raced elements outlined in red."""
        highlight = [(r.array, i) for r in self.races for i in r.elements]
        return threadviz.draw(self.trace, buffers, by_interval=True, highlight=highlight, **kwargs)


def run(kernel, grid, block, *args, names=None, orders=1, step_seconds=None) -> Report:
    """Launch ``kernel[grid, block](*args)`` in the simulator, recorded, and check it (see the module).

    NumPy arrays in ``args`` change in place; ``names`` labels them in order (default: the
    kernel's parameter names). ``orders``: how many thread orders to run (1: forward; 3: forward,
    reverse, shuffle:0) or a list of order names. ``step_seconds``: how long one thread may run
    without reaching a barrier before the rest of its round runs together with it."""
    if not device.SIMULATOR:
        device.launch(kernel, grid, block, *args)
        device.synchronize()
        return Report([], [], None, None, NEEDS_SIMULATOR)
    plan = simsched.orders(orders)
    arrays = [a for a in args if isinstance(a, np.ndarray) and a.ndim > 0]
    inputs = [a.copy() for a in arrays]
    traces, outcomes = [], {}
    for n, order in enumerate(plan):
        if n:
            for a, start in zip(arrays, inputs):
                a[...] = start
        trace = simsched.record_launch(kernel, grid, block, args, names, order, step_seconds=step_seconds)
        traces.append(trace)
        outcomes[str(order)] = {name: a.copy() for name, a in zip(_argument_names(trace), arrays)}
    first = next(iter(outcomes.values()))
    for a, name in zip(arrays, first):
        a[...] = first[name]
    races = _union(find_races(t) for t in traces)
    divergence = _union(find_divergence(t) for t in traces)
    garbage = _union(find_uninitialised(t) for t in traces)
    return Report(races, divergence, traces[0], not (races or divergence or garbage), "", garbage, outcomes,
                  _differences(traces[0], outcomes))


def _argument_names(trace: Trace) -> list:
    return [n for n in trace.arrays if n not in trace.shared]


def _union(found) -> list:
    out: dict = {}
    for items in found:
        for item in items:
            out.setdefault(item.message, item)
    return list(out.values())


# --- races ------------------------------------------------------------------------------------


def _conflict(a: Access, b: Access) -> bool:
    if (a.block, a.thread) == (b.block, b.thread) or a.kind == b.kind == "atomic" or a.kind == b.kind == "read":
        return False
    return a.block != b.block or a.interval == b.interval       # different blocks: global memory only


def find_races(trace: Trace) -> list:
    """Every race of ``trace``, one per (array, pair of lines), in array then element order."""
    groups: dict = {}
    for a in trace.accesses:
        if a.in_bounds:          # shared memory: one copy per block, so only a block's own threads meet
            same = groups.setdefault((a.buffer, a.block if a.space == "shared" else (), a.index), {})
            same.setdefault((a.block, a.thread, a.interval, a.kind, a.where, a.via), a)   # a loop's repeats: its first
    rank = {name: i for i, name in enumerate(trace.arrays)}
    found: dict = {}
    elements: dict = {}
    program = _ProgramOrder(trace)
    for key in sorted(groups, key=lambda k: (rank.get(k[0], len(rank)), k[1], k[2])):
        accesses = sorted(groups[key].values(), key=lambda a: (a.block, a.thread, a.seq))
        reads = [a for a in accesses if a.kind == "read"]
        for w in (a for a in accesses if a.kind != "read"):
            for x in accesses if w.kind == "write" else reads:
                if not _conflict(w, x):
                    continue
                first, second = (x, w) if x.kind == "read" or (w.kind != "read" and (x.block, x.thread) <
                                                                (w.block, w.thread)) else (w, x)
                pair = (key[0], frozenset(((first.where, first.via), (second.where, second.via))))
                if pair not in found:
                    found[pair] = Race(key[0], key[2], first, second, _race_sentence(trace, first, second, program))
                    elements[pair] = {key[2]: None}
                elements[pair][key[2]] = None
    return [dataclasses.replace(race, elements=tuple(elements[pair])) for pair, race in found.items()]


def top(a: Access) -> Where:
    """The kernel's own line of an access: where it is, or the line that called its device function."""
    return a.via or a.where


class _ProgramOrder:
    """Which of two kernel lines a thread ran first within a barrier interval (its own access count)."""

    def __init__(self, trace: Trace):
        self._first: dict = {}
        for a in trace.accesses:
            seen = self._first.setdefault((a.block, a.thread, a.interval), {})
            seen[top(a)] = min(seen.get(top(a), a.seq), a.seq)

    def earlier(self, a: Access, b: Access):
        """``(earlier, later)`` of the two accesses' lines as a thread that ran both ran them, else ``None``."""
        for who in (b, a):
            seen = self._first.get((who.block, who.thread, who.interval), {})
            if top(a) in seen and top(b) in seen:
                return (top(a), top(b)) if seen[top(a)] <= seen[top(b)] else (top(b), top(a))
        return None


def who(trace: Trace, a: Access) -> str:
    """``(block, thread)`` with as many dimensions as the launch uses: ``(0, 7)`` or ``((0, 1), (3, 2))``."""
    def part(index, dims):
        n = max((i + 1 for i, d in enumerate(dims) if d > 1), default=1)
        return str(index[0]) if n == 1 else str(tuple(index[:n]))
    return f"({part(a.block, trace.grid)}, {part(a.thread, trace.block)})"


def element(trace: Trace, name: str, index: int) -> str:
    shape = trace.arrays[name].shape
    if len(shape) <= 1:
        return f"{name}[{index}]"
    return f"{name}[{', '.join(str(int(i)) for i in np.unravel_index(index, shape))}]"


def _act(a: Access, what: str, again: bool) -> str:
    """``read s[6]``, ``also wrote it``, ``updated it with `cuda.atomic.add```."""
    if a.kind == "atomic":
        return f"updated {what} with `cuda.atomic.{a.op}`"
    return {"read": "read", "write": "also wrote" if again else "wrote"}[a.kind] + f" {what}"


def _race_sentence(trace: Trace, first: Access, second: Access, program: _ProgramOrder) -> str:
    home = trace.kernel
    both_write = first.kind != "read" and second.kind != "read"
    said = (f"thread {who(trace, first)} {_act(first, element(trace, first.buffer, first.index), False)} at "
            f"{place(first.where, first.via, home)}{',' if first.via else ''} while thread {who(trace, second)} "
            f"{_act(second, 'it', both_write)} at "
            + place(second.where, second.via, home, quote=(second.where, second.via) != (first.where, first.via)))
    if first.block != second.block:
        return (f"{said}: they are in different blocks, which no barrier orders (`cuda.syncthreads()` waits "
                f"only for the threads of one block): give each element of {first.buffer} to one block, or "
                "use `cuda.atomic`")
    if first.where == second.where and (both_write or first.run == second.run):
        if both_write:
            return (f"{said}, in the same barrier interval: which value stays depends on the thread order; give "
                    "each element one writing thread, or combine the values with `cuda.atomic`")
        return (f"{said}, with no `cuda.syncthreads()` between: {first.where.at(home)} reads what other threads "
                "write on the same line: read into a variable, `cuda.syncthreads()`, then write")
    return f"{said}, with no `cuda.syncthreads()` between: put one {_placement(home, first, second, program)}"


def place(where: Where, via: Where | None, home: str, quote: bool = True) -> str:
    """``line 9 (`text`)``, and ``, called from line 4 (`text`)`` for a line in a device function."""
    said = where.quoted(home) if quote else where.at(home)
    return said + (f", called from {via.quoted(home)}" if via is not None and quote else "")


def _placement(home: str, first: Access, second: Access, program: _ProgramOrder) -> str:
    """Where a barrier separates the two accesses: after the one that came first (in an earlier round of
    a loop, else earlier in the thread's own order), before the other."""
    if first.run != second.run and first.via is None and second.via is None:
        early, late = (first.where, second.where) if first.run < second.run else (second.where, first.where)
    else:
        early, late = program.earlier(first, second) or sorted((top(first), top(second)),
                                                               key=lambda w: (w.file, w.line))
    if early.file != late.file or early.function != late.function:
        return f"after {early.at(home)}, before {late.at(home)}"
    if early.line < late.line:
        return f"between {early.at(home)} and line {late.line}"
    return (f"after {early.at(home)}, so that it ends each round of the loop (outside any `if`: every thread "
            "must reach it)")


# --- barrier divergence -----------------------------------------------------------------------


def block_name(trace: Trace, block: tuple) -> str:
    """``(0,)`` for a 1-D grid, ``(0, 1)`` for a 2-D one."""
    n = max((i + 1 for i, d in enumerate(trace.grid) if d > 1), default=1)
    return str(tuple(block[:n]))


def find_divergence(trace: Trace) -> list:
    """Each barrier call site that some round of some block saw only part of the block reach (once per
    site). The barriers right after it that the same threads reach are folded into its report."""
    first: dict = {}            # site -> (round, its threads, [sites folded into it])
    folded: set = set()
    last: dict = {}             # block -> (the threads, the site) of its last divergent one-site round
    for r in trace.barriers:
        reached = frozenset(t for threads in r.arrived.values() for t in threads)
        if len(r.arrived) == 1 and len(reached) == r.total:
            last.pop(r.block, None)
            continue
        prev = last.get(r.block)
        if prev and len(r.arrived) == 1 and reached == prev[0]:
            (site,) = r.arrived
            if site not in first and site not in folded:
                first[prev[1]][2].append(site)
                folded.add(site)
            continue
        for site, threads in r.arrived.items():
            if site not in first and site not in folded:
                first[site] = (r, threads, [])
        last[r.block] = (reached, next(iter(r.arrived))) if len(r.arrived) == 1 else None
    return [_divergence(trace, site, *found) for site, found in first.items()]


def _divergence(trace: Trace, site, r, threads, after) -> Divergence:
    (kind, where, via), home = site, trace.kernel
    reached = sum(len(t) for t in r.arrived.values())
    others = [f"{len(t)} waited at {w.at(home)}" for (k, w, v), t in r.arrived.items() if (k, w, v) != site]
    if r.total > reached:
        others.append(f"{r.total - reached} finished without reaching it")
    called = f", called from {via.quoted(home)}," if via is not None else ""
    message = (f"cuda.{kind}() at {where.at(home)}{called} was reached by {len(threads)} of {r.total} threads "
               f"of block {block_name(trace, r.block)}: a barrier inside `if` that not every thread takes is "
               f"undefined behaviour (it can hang on a GPU); the other threads: {', '.join(others)}")
    if after:
        lines = ", ".join(str(w.line) for _, w, _ in after)
        many = len(after) > 1
        message += (f"; {f'the {len(after)} barriers' if many else 'the barrier'} after it (line{'s' if many else ''} "
                    f"{lines}) {'were' if many else 'was'} reached by the same {len(threads)} threads")
    return Divergence(where.line, len(threads), r.total, r.block, message, where, kind, via,
                      tuple(w.line for _, w, _ in after))


# --- shared memory read before it is written ---------------------------------------------------


def _initialises(w: Access, r: Access) -> bool:
    """Whether write (or atomic) ``w`` comes before read ``r`` or races with it (then the race is the report)."""
    if w.interval != r.interval:
        return w.interval < r.interval
    if w.thread == r.thread:
        return w.seq < r.seq
    return w.kind == "write" or r.kind == "read"


def find_uninitialised(trace: Trace) -> list:
    """Reads and atomic updates of shared elements that no thread of the block had written (once per
    array and line): shared memory starts as garbage (here ``simtrace.GARBAGE_BYTE`` bytes)."""
    writes: dict = {}
    for a in trace.accesses:
        if a.space == "shared" and a.in_bounds and a.kind != "read":
            writes.setdefault((a.buffer, a.block, a.index), []).append(a)
    found: dict = {}
    for r in trace.accesses:
        if r.space != "shared" or not r.in_bounds or r.kind == "write" or (r.buffer, r.where, r.via) in found:
            continue
        if any(_initialises(w, r) for w in writes.get((r.buffer, r.block, r.index), [])):
            continue
        did = "read" if r.kind == "read" else f"updated (`cuda.atomic.{r.op}`)"
        found[(r.buffer, r.where, r.via)] = Uninitialised(r.buffer, r.index, r, (
            f"thread {who(trace, r)} {did} {element(trace, r.buffer, r.index)} at "
            f"{place(r.where, r.via, trace.kernel)} "
            f"before any thread of block {block_name(trace, r.block)} wrote it: shared memory starts as "
            "garbage; write every element first, then `cuda.syncthreads()`"))
    return list(found.values())


# --- the result under other thread orders -----------------------------------------------------


def _differences(trace: Trace, outcomes: dict) -> list:
    """One sentence per argument array whose result changed with the thread order."""
    (base_order, base), *rest = outcomes.items()
    out = []
    for name, want in base.items():
        for order, results in rest:
            got = results[name]
            if got.size == 0:
                continue
            differ = np.flatnonzero((got.reshape(-1).view(np.uint8).reshape(got.size, -1) !=
                                     want.reshape(-1).view(np.uint8).reshape(want.size, -1)).any(axis=1))
            if differ.size:
                i = int(differ[0])
                out.append(f"the result depends on the thread order: {element(trace, name, i)} is "
                           f"{want.reshape(-1)[i]} with the threads in {base_order} order and "
                           f"{got.reshape(-1)[i]} in {order} order ({differ.size} element(s) of {name} differ)")
                break
    return out
