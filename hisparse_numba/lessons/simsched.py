"""Run one launch in Numba's CUDA simulator with every access recorded, a block's threads one at a time.

``record_launch(kernel, grid, block, args, names=None, order="forward")`` returns a
``simtrace.Trace``. The simulator runs each CUDA thread as a Python thread and lets them run
freely between barriers; here a scheduler takes over (the simulator's ``BlockManager`` is replaced
for the launch): in each round it lets the block's live threads run *one at a time*, in the order
``Order`` gives, each until its next barrier or its return. When every thread has arrived, the
round's barrier call sites are recorded (``BarrierRound``: a barrier only some threads reach is
barrier divergence) and the next round starts. Blocks run one after another, as in the simulator,
in the order ``Order`` gives too.

Running one thread at a time makes a launch deterministic for a given order, and a race whose
outcome depends on the order gives different results under different orders:

* ``forward``: threads (and blocks) in index order, as the simulator mostly runs them;
* ``reverse``: the last thread first;
* ``shuffle:N``: a permutation drawn from seed ``N``, new in every round.

Barriers never hang: a round ends when every live thread has waited at *some* barrier or
returned. A thread that runs ``STEP_SECONDS`` without reaching a barrier may be waiting for
another thread (a spin loop): the rest of the round then runs together (``Trace.free_rounds``). A
round in which no thread arrives for ``STALL_SECONDS`` (an endless loop, or a block waiting for a
later block: blocks run one after another) stops the launch with ``RecorderLimit`` and its stuck
threads with ``SystemExit``.

Nothing here imports Numba: the kernel object leads to the simulator's module.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import sys
import threading

import numpy as np

from .. import device
from . import simtrace

STEP_SECONDS = 2.0
STALL_SECONDS = 30.0
ORDERS_MESSAGE = "orders: a count >= 1, or names among 'forward', 'reverse' and 'shuffle:N' (N a seed)"
BARRIERS = ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or")

_LAUNCH_LOCK = threading.Lock()
_active = None          # the _Session of the launch being recorded


class Order:
    """The order a launch's blocks run in, and a block's threads within each barrier round."""

    def __init__(self, spec: str = "forward"):
        name, _, seed = str(spec).partition(":")
        if name not in ("forward", "reverse", "shuffle") or (seed and not seed.isdigit()) or \
                (seed and name != "shuffle"):
            raise ValueError(f"{ORDERS_MESSAGE}, got {spec!r}")
        self.name, self.seed = name, int(seed or 0)

    def __str__(self):
        return f"shuffle:{self.seed}" if self.name == "shuffle" else self.name

    def arrange(self, items: list, *salt: int) -> list:
        """``items`` (sorted by index) in this order; ``salt`` picks the shuffle of one round."""
        if self.name == "forward":
            return list(items)
        if self.name == "reverse":
            return list(reversed(items))
        rng = np.random.default_rng([self.seed, *salt])
        return [items[i] for i in rng.permutation(len(items))]


def orders(spec) -> list:
    """``orders=`` of ``racecheck.run``: a count (forward, reverse, shuffle:0, shuffle:1, ...) or names."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"{ORDERS_MESSAGE}, got {spec!r}")
        names = ["forward", "reverse"] + [f"shuffle:{i}" for i in range(max(spec - 2, 0))]
        return [Order(n) for n in names[:spec]]
    if isinstance(spec, (str, Order)):
        spec = [spec]
    return [s if isinstance(s, Order) else Order(s) for s in spec]


def _thread_class(block_thread):
    """The simulator's thread class (``block_thread``) with barriers that hand control to the scheduler."""

    class SerialThread(block_thread):
        def __init__(self, *args):
            super().__init__(*args)
            self.interval, self.seq, self.finished = 0, 0, False
            self.site, self.value, self.result = None, None, None

        def run(self):
            try:
                self.syncthreads_event.wait()             # the first turn
                self.syncthreads_event.clear()
                if not self.abort:
                    super().run()
            except SystemExit:                            # _interrupt stopped it
                pass
            finally:
                self.finished = True
                self._manager.handback.release()

        def _barrier(self, kind, value=None):
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads call")
            f = simtrace.learner_frame()
            self.site, self.value = (kind, simtrace.where_of(f), simtrace.caller_of(f)), value
            self._manager.handback.release()
            self.syncthreads_event.wait()
            self.syncthreads_event.clear()
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads clear")
            self.interval += 1
            self.runs, self.last_access = {}, None        # line executions count from the barrier
            return self.result

        def syncthreads(self):
            self._barrier("syncthreads")

        def syncthreads_count(self, value):
            return self._barrier("syncthreads_count", value)

        def syncthreads_and(self, value):
            return self._barrier("syncthreads_and", value)

        def syncthreads_or(self, value):
            return self._barrier("syncthreads_or", value)

    return SerialThread


class SerialBlockManager:
    """Replaces the simulator's ``BlockManager`` during a recorded launch (same constructor and ``run``)."""

    def __init__(self, f, grid_dim, block_dim, debug):
        self._f, self._block_dim, self._debug = f, block_dim, debug
        self.handback = threading.Semaphore(0)      # released by a thread at each barrier and at its end

    def run(self, grid_point, *args):
        session = _active
        session.patch_context()
        block = session.next_block()

        def target():
            self._f(*args)

        threads = [session.thread_class(target, self, block, p, self._debug) for p in np.ndindex(*self._block_dim)]
        for t in threads:
            t.start()
        try:
            session.run_block(self, block, threads)
        except BaseException:
            session.trace.stopped = True
            for t in threads:
                t.abort = True
                t.syncthreads_event.set()
            raise


class _Session:
    """One recorded launch: its trace, order, the simulator module, the blocks still to run."""

    def __init__(self, simkernel, trace, order, grid_dim, step_seconds, stall_seconds):
        self.simkernel, self.trace, self.order = simkernel, trace, order
        self.thread_class = _thread_class(simkernel.BlockThread)
        self.blocks = order.arrange(list(np.ndindex(*grid_dim)))
        self.step_seconds, self.stall_seconds = step_seconds, stall_seconds
        self.patched = False

    def patch_context(self):
        if not self.patched:             # the launch's fake ``cuda`` module: record shared arrays and atomics
            ctx = self.simkernel._get_kernel_context()
            ctx._shared = simtrace.RecordingShared(ctx._shared, self.trace)
            ctx._atomic = simtrace.RecordingAtomic(ctx._atomic)
            self.patched = True

    def next_block(self):
        return self.blocks.pop(0)

    def run_block(self, manager, block, threads):
        live, number = threads, 0
        flat_block = int(np.ravel_multi_index(block, self.trace.grid))
        while live:
            self._round(manager, self.order.arrange(live, flat_block, number))
            parked = [t for t in live if not t.finished]
            if parked:
                arrived: dict = {}
                for t in parked:
                    arrived.setdefault(t.site, []).append(tuple(t.threadIdx))
                exited = tuple(tuple(t.threadIdx) for t in live if t.finished)
                self.trace.barriers.append(simtrace.BarrierRound(
                    tuple(block), number, {k: tuple(v) for k, v in arrived.items()}, exited, len(threads)))
                _reduce(parked)
            live, number = parked, number + 1

    def _round(self, manager, queue):
        for i, t in enumerate(queue):
            t.syncthreads_event.set()
            if manager.handback.acquire(timeout=self.step_seconds):
                _raise_if_failed([t])
                continue
            rest = queue[i + 1:]                 # t may wait for another thread: run the rest with it
            self.trace.free_rounds += 1
            for u in rest:
                u.syncthreads_event.set()
            for _ in range(len(rest) + 1):
                if not manager.handback.acquire(timeout=self.stall_seconds):
                    for u in [t] + rest:
                        _interrupt(u)
                    raise simtrace.cannot_follow(
                        f"a launch in which no thread reached a barrier or returned for {self.stall_seconds:.0f} s "
                        "(a thread loops forever, or waits for something no thread of its block does: the "
                        "simulator runs blocks one after another, so a block that waits for a later block never "
                        "finishes)")
                _raise_if_failed([t] + rest)
            return


def _interrupt(thread) -> None:
    """Stop a simulated thread stuck in a loop: CPython raises ``SystemExit`` in it at its next
    bytecode (a Python thread cannot be killed; this is the one way to end it from outside)."""
    if thread.is_alive() and thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(SystemExit))


def _raise_if_failed(threads):
    for t in threads:
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def _reduce(parked):
    """The results of ``syncthreads_count/and/or`` over the threads that waited at them."""
    for kind in BARRIERS[1:]:
        waiting = [t for t in parked if t.site[0] == kind]
        if waiting:
            count = sum(1 for t in waiting if t.value)
            result = {"syncthreads_count": count, "syncthreads_and": int(count == len(waiting)),
                      "syncthreads_or": int(count > 0)}[kind]
            for t in waiting:
                t.result = result


def _dims(d) -> tuple:
    d = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    return d + (1,) * (3 - len(d))


def _simulator_module(kernel):
    module = sys.modules.get(type(kernel).__module__)
    if module is None or not all(hasattr(module, n) for n in ("BlockManager", "BlockThread", "_get_kernel_context")):
        raise TypeError(f"kernel: a @cuda.jit kernel of the CUDA simulator, got {type(kernel).__name__}")
    return module


def parameter_names(kernel) -> list:
    try:
        return list(inspect.signature(getattr(kernel, "py_func", kernel)).parameters)
    except (TypeError, ValueError):
        return []


def wrap_arguments(kernel, args, names, trace) -> list:
    """``args`` with each NumPy array (``ndim > 0``) a ``RecordingArray`` named from ``names`` (one
    per array, in order) or else the kernel's parameter name."""
    params, wrapped, k = parameter_names(kernel), [], 0
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.ndim > 0:
            name = names[k] if names and k < len(names) else params[i] if i < len(params) else f"arg{k}"
            k += 1
            if name in trace.arrays:
                raise ValueError(f"names: two array arguments are both called {name!r}")
            trace.arrays[name] = a
            wrapped.append(simtrace.RecordingArray(a, name, trace))
        else:
            wrapped.append(a)
    return wrapped


def record_launch(kernel, grid, block, args, names=None, order="forward", *,
                  step_seconds=None, stall_seconds=None) -> simtrace.Trace:
    """Launch ``kernel[grid, block](*args)`` in the simulator, recorded; NumPy arrays change in place."""
    simkernel = _simulator_module(kernel)
    order = order if isinstance(order, Order) else Order(order)
    trace = simtrace.Trace(_dims(grid), _dims(block), kernel=getattr(getattr(kernel, "py_func", kernel),
                                                                       "__name__", ""), order=str(order))
    wrapped = wrap_arguments(kernel, args, names, trace)
    simtrace.infrastructure(__file__, dirs=[os.path.dirname(simkernel.__file__)])
    global _active
    with _LAUNCH_LOCK:
        saved = simkernel.BlockManager
        _active = _Session(simkernel, trace, order, trace.grid,
                           STEP_SECONDS if step_seconds is None else step_seconds,
                           STALL_SECONDS if stall_seconds is None else stall_seconds)
        simkernel.BlockManager = SerialBlockManager
        try:
            device.run_simulated(kernel, grid, block, wrapped)
        finally:
            simkernel.BlockManager, _active = saved, None
    return trace
