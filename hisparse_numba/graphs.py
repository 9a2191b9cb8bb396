"""CUDA graphs: record a step's launches once, replay them with one host call.

sglang's decode loop replays captured graphs, which is why the launchers split a host-side check
from a launch that only enqueues work (lesson 08 teaches the padding rows a replayed graph
carries). On a GPU ``capture_graph`` records on a CuPy side stream; the simulator and the
``compile-only`` mode have no graphs, so there the function runs eagerly, now and on every replay.
``device`` re-exports both names (``device.capture_graph``); nothing here imports Numba.
"""

from __future__ import annotations

from .backend import BACKEND


class CapturedGraph:
    """A recorded sequence of launches; :meth:`replay` enqueues it again on CuPy's current stream.

    Without a GPU there is nothing to record: ``eager`` is True and :meth:`replay` calls the
    function again.
    """

    def __init__(self, fn, graph=None, stream=None):
        self.fn, self.graph, self.stream = fn, graph, stream
        self.eager = graph is None

    def replay(self) -> None:
        if self.graph is None:
            self.fn()
        else:
            import cupy

            self.graph.launch(cupy.cuda.get_current_stream())


def capture_graph(fn) -> CapturedGraph:
    """Record every kernel ``fn()`` launches into a CUDA graph and return it (sglang's decode loop
    replays such graphs: one host call per step instead of one per kernel).

    ``fn`` must only enqueue work: no host synchronisation, no read-back, no allocation that
    synchronises, so call the launchers' ``launch_*`` pieces with pre-checked arguments, not the
    public functions that validate values on the host. Its arguments are baked in by address:
    replay reads and writes the same buffers, so refill them in place between replays. Capture
    runs ``fn`` once on a side stream without executing it (so run ``fn`` once eagerly before, if
    its kernels may still need compiling); the simulator (and compile-only mode)
    has no graphs, so there ``fn`` runs eagerly now and again on every replay.
    """
    if BACKEND != "cuda":
        fn()
        return CapturedGraph(fn)
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.runtime.deviceSynchronize()  # every stream of the device, Numba's included
    relaxed = getattr(cupy.cuda.runtime, "streamCaptureModeRelaxed", None)
    with stream:
        stream.begin_capture(*([] if relaxed is None else [relaxed]))
        try:
            fn()
        finally:
            graph = stream.end_capture()
    if hasattr(graph, "upload"):
        graph.upload(stream)
    stream.synchronize()
    return CapturedGraph(fn, graph, stream)
