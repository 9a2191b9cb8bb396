"""The puzzles' machinery: named cases, the learner's launch, the verdict, graded hints.

A ``Puzzle`` is a set of named ``Case`` s: a launch geometry, the kernel's arguments in order (every
output pre-filled with ``POISON``, so an element nobody wrote is seen) and the reference's outputs.
``check(puzzle, kernel)`` runs the learner's kernel on every case and prints one line:

* ``not yet:`` while the stub still raises ``NotImplementedError``;
* ``wrong: case "name" (what the case is): ...`` for the first problem of the first case that has
  one, in this order: an error the kernel raised, an access past an array's end, a race or a
  barrier not every thread reaches (threads that cooperate run through ``racecheck``), an output
  element unlike the reference's (who wrote it, and what the reference has), one thread doing
  the work of many (a serial loop: the trace counts the elements each thread touched);
* ``right: all N cases (...)`` otherwise.

In the simulator every launch is recorded (``threadviz``) and a wrong answer draws its accesses.
On a GPU the same cases run on the device and the outputs are compared byte for byte; races,
per-thread work and pictures need the simulator. Inputs live at the front of arenas twice their
size, so a missing guard on a GPU reads and writes the arena's spare half, not another buffer.

Used by ``ex14`` and ``ex15`` (lessons 14 and 15, the kernel puzzles); ``pictures`` draws.
"""

from __future__ import annotations

import ast
import ctypes
import inspect
import textwrap
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ... import device
from .. import racecheck, simtrace, threadviz
from ..ex00 import LearnerError, NotYet, learner_line
from .warp_votes import DivergentVote

POISON = -77                             # every output starts as this: an element nobody wrote shows
RUNAWAY_SECONDS = 20.0     # a case runs in well under a second; below simsched's stall limit (30 s)


def poison(shape, dtype) -> np.ndarray:
    """An output array full of ``POISON`` (its two's-complement bits for unsigned types)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "u":
        return np.full(shape, np.array(POISON, np.int64).astype(dtype), dtype)
    return np.full(shape, POISON, dtype)


@dataclass
class Case:
    """One launch of a puzzle: ``args`` are the kernel's arguments in order (name -> NumPy array or
    scalar); ``want`` the reference's value of every output; ``about`` what is special here."""

    name: str
    grid: object
    block: object
    args: dict
    want: dict
    about: str = ""

    def label(self) -> str:
        return f'case "{self.name}"' + (f" ({self.about})" if self.about else "")


@dataclass
class Puzzle:
    """A puzzle: its cases, its verdict's words, its hints and how to judge and draw it.

    ``wrap``: the checker's kernel around a learner's device function (``None``: the learner writes
    the kernel). ``cooperative``: threads share memory, vote or wait for each other, so every case
    runs through ``racecheck``. ``work``: ``{buffer: (kind, most)}``, the most elements of ``buffer``
    one thread may ``kind`` ("read"/"write"); ``most`` is an int or ``case -> int``. ``judge``:
    ``(case, outputs) -> (problem, highlight) | None`` for outputs with more than one right answer
    (default: byte equality with ``case.want``). ``describe``: ``(case, buffer, flat) -> str``.
    ``explain``: ``(case, trace, buffer, flat, got) -> str | None``, a likely cause added to a wrong
    element (``got``: its value).
    ``draw``: the buffers the pictures show (``None``: all) and ``cols`` (cells per grid row).
    ``value``: how an element's value prints. ``extra``: ``run -> (problem, highlight) | None``,
    a last check once the outputs are right (in the simulator: who moved what). ``draw_shared``:
    whether pictures show the kernel's shared arrays (not when they belong to a given device function).
    ``as_values``: ``(case, array) -> array`` as a picture of values shows it (words as float32 items).
    ``on_race``: what this puzzle adds to a race report (when the fix is an atomic, not a barrier).
    """

    key: str
    cases: Callable[[], list]
    right: str
    hints: tuple
    wrap: Callable | None = None
    cooperative: bool = False
    work: dict = field(default_factory=dict)
    judge: Callable | None = None
    describe: Callable | None = None
    explain: Callable | None = None
    draw: tuple | None = None
    cols: int | None = None
    value: Callable = None
    extra: Callable | None = None
    draw_shared: bool = True
    as_values: Callable | None = None
    on_race: str = ""


# --- running the learner's kernel -------------------------------------------------------------


def arena(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` at the front of a zeroed buffer twice its size (a view of its first half)."""
    a = np.ascontiguousarray(a)
    back = np.zeros(2 * max(a.size, 1), a.dtype)
    back[:a.size] = a.reshape(-1)
    return back[:a.size].reshape(a.shape)


def _to_device_arena(a: np.ndarray):
    root = a.base
    if root is None or root.size != 2 * max(a.size, 1):
        return device.to_device(a)
    return device.to_device(root)[:a.size].reshape(a.shape)


def stub_message(fn) -> str | None:
    """What ``fn``'s source still raises as NotImplementedError (its text after the last ": ", as
    the simulator reports it), or None when it raises none. A GPU kernel cannot raise, so on a GPU
    the checkers read the stub's words from its source."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(fn, "py_func", fn))))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        exc = node.exc if isinstance(node, ast.Raise) else None
        call = exc if isinstance(exc, ast.Call) else None
        name = call.func if call else exc
        if isinstance(name, ast.Name) and name.id == "NotImplementedError":
            text = call.args[0].value if call and call.args and isinstance(call.args[0], ast.Constant) else ""
            return str(text).split(": ", 1)[-1] or "fill it in"
    return None


@dataclass
class Run:
    """One case run: the outputs (``args``, in place), the trace (``None`` on a GPU), racecheck's
    messages (races, divergent barriers, uninitialised shared reads; empty when it found none or
    did not run) and the elements raced on."""

    case: Case
    args: dict
    trace: object
    races: list = field(default_factory=list)
    raced: list = field(default_factory=list)


class RunawayKernel(Exception):
    """Raised inside the simulator's threads of a launch that ran past ``RUNAWAY_SECONDS``."""


@contextmanager
def stop_runaways(seconds: float):
    """In the simulator, raise ``RunawayKernel`` inside every kernel thread still running after
    ``seconds`` (a loop that never ends would otherwise hang the notebook): the launch then fails
    as if the kernel had raised. A pure-Python loop is stopped by an asynchronous exception."""
    done = threading.Event()

    def watch():
        if done.wait(seconds):
            return
        while not done.is_set():
            for t in threading.enumerate():
                if t.is_alive() and any(c.__name__ == "BlockThread" for c in type(t).__mro__):
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident),
                                                               ctypes.py_object(RunawayKernel))
            done.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def run_case(puzzle: Puzzle, learner, case: Case, *, racecheck_it: bool = True) -> Run:
    """Run the learner's code on ``case`` (fresh copies of its arrays). The learner's
    NotImplementedError becomes ``NotYet``; any other exception a ``LearnerError`` naming the case."""
    kernel = puzzle.wrap(learner) if puzzle.wrap else learner
    args = {k: arena(v) if isinstance(v, np.ndarray) else v for k, v in case.args.items()}
    names = [k for k, v in args.items() if isinstance(v, np.ndarray)]
    stub = None if device.SIMULATOR else stub_message(learner)
    if stub:
        raise NotYet(stub)
    try:
        if not device.SIMULATOR:
            _run_on_gpu(kernel, case, args)
            return Run(case, args, None)
        with stop_runaways(RUNAWAY_SECONDS):
            if puzzle.cooperative and racecheck_it:
                return _racecheck(kernel, case, args, names)
            trace = threadviz.record(kernel, case.grid, case.block, *args.values(), names=names)
            return Run(case, args, trace)
    except RunawayKernel:
        raise LearnerError(f"{case.label()}: your kernel was still running after {RUNAWAY_SECONDS:g} s "
                           "(these cases take well under one): a loop that never ends? (a probe that "
                           "never meets its end, an index that never moves, reads past an array's end "
                           "that the simulator answers with 0)") from None
    except NotImplementedError as err:
        raise NotYet(str(err).split(": ", 1)[-1]) from None
    except Exception as err:  # noqa: BLE001 - an error inside the learner's kernel is theirs
        raise LearnerError(f"{case.label()}: your kernel raised {type(err).__name__}: {err}"
                           f"{learner_line(learner, err)}") from None


@contextmanager
def keeping_traces(kept: list):
    """Within the block, every ``simtrace.Trace`` made is also appended to ``kept``: the trace of a
    launch that raised (racecheck.run then raises without a report) can still be checked."""
    original = simtrace.Trace

    class Kept(original):
        def __init__(self, *args, **kwargs):
            original.__init__(self, *args, **kwargs)
            kept.append(self)

    simtrace.Trace = Kept
    try:
        yield kept
    finally:
        simtrace.Trace = original


def _racecheck(kernel, case: Case, args: dict, names: list) -> Run:
    """The case through racecheck. When the kernel raises after a divergent barrier or a race (a
    thread that returned early leaves garbage behind), the findings are the answer, not the error."""
    kept: list = []
    try:
        with keeping_traces(kept):
            report = racecheck.run(kernel, case.grid, case.block, *args.values(), names=names)
    except (NotImplementedError, RunawayKernel, DivergentVote):     # these say what happened themselves
        raise
    except Exception as err:  # noqa: BLE001 - the learner's kernel raised: what led to it?
        if not kept:
            raise
        trace = kept[0]
        report = racecheck.Report(racecheck.find_races(trace), racecheck.find_divergence(trace), trace, False,
                                  uninitialised=racecheck.find_uninitialised(trace))
        found = race_messages(report)
        if not found:
            raise
        found[-1] += f" (and then your kernel raised {type(err).__name__}: {str(err).split(': ', 1)[-1]})"
        return Run(case, args, trace, found, [(r.array, int(i)) for r in report.races for i in r.elements])
    raced = [(r.array, int(i)) for r in report.races for i in r.elements]
    return Run(case, args, report.trace, race_messages(report), raced)


def race_messages(report) -> list:
    """racecheck's findings, each named: a race, a divergent barrier, an uninitialised shared read."""
    return ([f"a race: {r.message}" for r in report.races]
            + [f"a divergent barrier: {d.message}" for d in report.divergence]
            + [f"uninitialised shared memory: {u.message}" for u in report.uninitialised])


def _run_on_gpu(kernel, case, args):
    dev = {k: _to_device_arena(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    device.launch(kernel, case.grid, case.block, *dev.values())   # compiling may raise a typing error
    device.synchronize()
    for k, v in dev.items():
        if isinstance(args[k], np.ndarray):
            args[k][...] = device.to_host(v)


# --- what can be wrong ------------------------------------------------------------------------


def describe_element(puzzle: Puzzle, case: Case, name: str, flat: int) -> str:
    if puzzle.describe is not None:
        text = puzzle.describe(case, name, flat)
        if text:
            return text
    shape = np.shape(case.args[name])
    index = np.unravel_index(flat, shape) if len(shape) > 1 else (flat,)
    return f"{name}[{', '.join(str(int(i)) for i in index)}]"


def who_wrote(trace, name: str, flat: int, what: str, never_written: bool = False) -> str:
    """``"your thread (b, t) wrote <what>"`` or ``"no thread wrote <what>"``; on a GPU, which
    records no writers, the second when the element still holds the poison, else ``what``."""
    if trace is None:
        return f"no thread wrote {what}" if never_written else what
    writes = trace.writers(name).get(flat, [])
    if not writes:
        return f"no thread wrote {what}"
    who = " and ".join(sorted({a.who for a in writes}))
    return f"your thread {who} wrote {what}"


def show_value(v) -> str:
    return "POISON (never written)" if np.ndim(v) == 0 and v == POISON else f"{v}"


def show_word_pair(v) -> str:
    """An 8-byte word of a float32 pool, as the two float32 values it holds."""
    a, b = np.array([v], np.uint64).view(np.float32)
    return "POISON (never written)" if a == b == POISON else f"({a:g}, {b:g})"


def first_difference(puzzle: Puzzle, run: Run, name: str):
    """``(problem, highlight)`` for the first element of output ``name`` unlike the reference."""
    got, want = run.args[name], run.case.want[name]
    g, w = np.ascontiguousarray(got).reshape(-1), np.ascontiguousarray(want).reshape(-1)
    differ = g.view(np.uint8).reshape(g.size, -1) != w.view(np.uint8).reshape(w.size, -1)
    bad = np.flatnonzero(differ.any(axis=1))
    if bad.size == 0:
        return None
    i = int(bad[0])
    what = describe_element(puzzle, run.case, name, i)
    more = f" ({bad.size} elements differ)" if bad.size > 1 else ""
    value = puzzle.value or show_value
    shown = value(g[i])
    text = (f"{who_wrote(run.trace, name, i, what, shown.startswith('POISON'))}: {shown} where the "
            f"reference has {value(w[i])}{more}")
    if puzzle.explain is not None:
        cause = puzzle.explain(run.case, run.trace, name, i, g[i])
        if cause:
            text += f"; {cause}"
    return text, [(name, int(j)) for j in bad[:64]]


def out_of_bounds(trace):
    if trace is None or not trace.out_of_bounds():
        return None
    a = trace.out_of_bounds()[0]
    n = trace.arrays[a.buffer].size
    return (f"your thread {a.who} tried to {a.kind} element {a.index} of {a.buffer}, which has {n} "
            "(in the simulator an IndexError; on a GPU whatever lies past the end: another buffer's "
            "bytes)"), []


def too_much_work(puzzle: Puzzle, run: Run):
    """The first thread that touched more elements of a buffer than any thread needs: the work
    was not spread over the threads (a loop in one thread, the others idle)."""
    if run.trace is None:
        return None
    for name, (kind, most) in puzzle.work.items():
        bound = most(run.case) if callable(most) else most
        per_thread: dict = {}
        for a in run.trace.of(name, kind, True):
            per_thread.setdefault((a.block[0], a.thread[0]), set()).add(a.index)
        for (b, t), touched in sorted(per_thread.items()):
            if len(touched) > bound:
                verb = "read" if kind == "read" else "wrote"
                return (f"your thread ({b}, {t}) {verb} {len(touched)} elements of {name}, and no thread "
                        f"needs more than {bound}: one thread does the work of many (a serial loop); "
                        "give every thread its own share"), [(name, i) for i in sorted(touched)[:64]]
    return None


def problems_of(puzzle: Puzzle, run: Run):
    """The first problem of one case run, ``(text, highlight)``, or ``None``."""
    found = out_of_bounds(run.trace)
    if found:
        return found
    if run.races:
        first = run.races[0] + (f" (but here: {puzzle.on_race})" if puzzle.on_race and
                                run.races[0].startswith("a race") else "")
        return " Also: ".join([first] + run.races[1:2]), run.raced[:64]
    if puzzle.judge is not None:
        found = puzzle.judge(run.case, {k: run.args[k] for k in run.case.want})
        if found:
            return found
    else:
        for name in run.case.want:
            found = first_difference(puzzle, run, name)
            if found:
                return found
    found = too_much_work(puzzle, run)
    if found or puzzle.extra is None or run.trace is None:
        return found
    return puzzle.extra(run)


# --- the verdict, the picture, the hints ------------------------------------------------------


def hint(puzzles: dict, solutions: str, letter: str, level: int = 1) -> None:
    """Print hint ``level`` (1: a nudge, 2: the idea, 3: nearly the code) of puzzle ``letter``."""
    key = str(letter).lower()
    if key not in puzzles:
        print(f"no puzzle {letter!r}: the puzzles are {', '.join(sorted(puzzles))}")
        return
    puzzle = puzzles[key]
    if level not in (1, 2, 3):
        print(f"hint levels are 1 (a nudge), 2 (the idea) and 3 (nearly the code); after that, "
              f"{solutions}, section {puzzle.key}")
        return
    print(f"hint {puzzle.key}, level {level} of 3: {puzzle.hints[level - 1]}")
    if level == 3:
        print(f"(still stuck? {solutions}, section {puzzle.key})")
