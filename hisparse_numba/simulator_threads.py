"""Two repairs to Numba's CUDA simulator, whose blocks run as Python threads: the threads of an
aborted launch are stopped before the error reaches the caller, and a shared array is allocated
once per line however the block's threads interleave.

When one of a block's threads raises, the simulator
raises in the caller at once and only *asks* the block's other threads to stop: each stops at its
next barrier and runs until then. Their late writes would land after the caller's clean-up of the
aborted launch, or during its next launch (a speculative workspace's tickets and flags, say),
where a GPU launch would have finished. ``device.run_simulated`` calls :func:`stop_after_error`
before it re-raises (docs/two-worlds.md).

``cuda.shared.array`` in the simulator looks its line up in a table and, when the line is not there
yet, allocates the array and stores it. Two threads that reach a new line together can both miss
it: each then holds an array of its own, and what thread 0 writes "to shared memory" never
reaches a thread that reads its own, uninitialised copy (a rare, timing-dependent failure). :func:`lock_shared_allocation` makes the lookup
and the store one step. Nothing here imports Numba: ``device`` hands in the simulator's classes,
as it hands ``kernel_cache`` Numba's cache classes.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings

ABORT_JOIN_SECONDS = 60.0


def stop_after_error(error: BaseException, block_thread_class) -> None:
    """Stop every simulator thread (``block_thread_class``: the simulator's ``BlockThread``) at its
    next barrier, and when ``error`` came from a kernel thread, wait until they have all stopped.

    An error from the caller's own thread (an interrupt, a time limit on a spinning kernel) does
    not wait: a thread that spins never reaches a barrier. Threads still running after
    ``ABORT_JOIN_SECONDS`` get a warning; the kernel's error is still the one the caller sees."""
    threads = [t for t in threading.enumerate() if isinstance(t, block_thread_class)]
    for t in threads:
        t.abort, t.syncthreads_blocked = True, False
        t.syncthreads_event.set()
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code is not block_thread_class.run.__code__:
        tb = tb.tb_next
    if tb is None:              # not a kernel thread's error
        return
    end = time.monotonic() + ABORT_JOIN_SECONDS
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    running = sum(t.is_alive() for t in threads)
    if running:
        warnings.warn(f"{running} simulator threads of an aborted launch still run after "
                      f"{ABORT_JOIN_SECONDS:.0f} s: a thread waits for something no barrier ends",
                      RuntimeWarning, stacklevel=3)


def lock_shared_allocation(shared_class, allocate) -> None:
    """Make ``shared_class.array`` (the simulator's ``FakeCUDAShared``) give every thread that
    reaches one line the same array, allocated under a lock by ``allocate(shape, dtype)`` (the
    simulator's own allocation: ``dtype`` may be a NumPy or a Numba type). Dynamic shared memory
    (shape 0) and an alignment keep the simulator's own handling. Idempotent."""
    original = shared_class.array
    if getattr(original, "allocation_locked", False):
        return
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0:
            return original(self, shape, dtype, alignment)
        frame = sys._getframe(1)
        line = (frame.f_code.co_filename, frame.f_lineno)   # the simulator's key: one array a line
        with lock:
            found = self._allocations.get(line)
            if found is None:
                found = self._allocations[line] = allocate(shape, dtype)
        return found

    array.allocation_locked = True
    array.__doc__ = original.__doc__
    shared_class.array = array
