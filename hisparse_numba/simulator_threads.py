"""The simulator's threads after a kernel thread raised: stopped before the error reaches the caller.

Numba's CUDA simulator runs a block as Python threads. When one of them raises, the simulator
raises in the caller at once and only *asks* the block's other threads to stop: each stops at its
next barrier and runs until then. Their late writes would land after the caller's clean-up of the
aborted launch, or during its next launch (a speculative workspace's tickets and flags, say),
where a GPU launch would have finished. ``device.run_simulated`` calls :func:`stop_after_error`
before it re-raises (docs/two-worlds.md). Nothing here imports Numba: ``device`` hands in the
simulator's thread class, as it hands ``kernel_cache`` Numba's cache classes.
"""

from __future__ import annotations

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
