"""Device-side value checks: one check kernel per call, its verdict, and the gate of the writers.

A launcher checks the values its kernels index with (ranges, duplicates) on the device in one pass:
:func:`start_check` enqueues a reset of a small flags buffer and the family's check kernel, which
reports each bad element with :func:`flag_bad_dev` and ends with :func:`finish_check_dev`: the
block that finishes last writes the flags straight into pinned host memory (mapped), so no copy
follows the kernel. The launcher then enqueues its writing kernels with ``gate=check.gate``; each
starts with ``if gate_closed_dev(gate): return``. Only :meth:`ValueCheck.verdict` waits, and only
for the check, so a rejected call writes nothing and an accepted one never idles the stream
(docs/two-worlds.md, "Value checks on the device"). Every ``*_checks.py`` module builds on this.

Shapes: the flags are ``FLAG_WORDS`` int64 words: ``(count, first index)`` per condition
(``CHECK_CONDITIONS`` of them), then the gate word; after them ``EPOCH_WORD``, an input: the
call's claim epoch (``checks.claim_epoch``), written by the reset copy, and ``DONE_WORD``, the
count of blocks that have finished. So a check kernel's arguments are the same objects on every
call of a decode loop, and ``device.launch`` reuses their argument list.
"""

from __future__ import annotations

import functools

import numpy as np

from . import device
from .device import backend, cuda, xp

_INT64_MAX = (1 << 63) - 1

_BACKEND = backend()
_CUPY_CURRENT_STREAM = xp.cuda.get_current_stream if _BACKEND == "cuda" else None


CHECK_CONDITIONS = 8
GATE_WORD = 2 * CHECK_CONDITIONS   # any flagged element sets it; gated kernels then write nothing
FLAG_WORDS = GATE_WORD + 1        # what the verdict reads back
EPOCH_WORD = FLAG_WORDS           # set by the host before each check: the call's claim epoch
DONE_WORD = EPOCH_WORD + 1        # blocks of the check kernel that have finished (finish_check_dev)
DEVICE_WORDS = DONE_WORD + 1


@cuda.jit(device=True, inline=True)
def flag_bad_dev(flags, condition, index):
    """Record that element ``index`` breaks check ``condition`` (0 <= condition < 8) and close
    the gate of the call's writing kernels (``flags[GATE_WORD]``)."""
    cuda.atomic.add(flags, 2 * condition, 1)
    cuda.atomic.min(flags, 2 * condition + 1, index)
    flags[GATE_WORD] = 1


@cuda.jit(device=True, inline=True)
def report_value_dev(flags, condition, value):
    """Carry ``value`` back to the host in the verdict of ``condition`` without rejecting the call
    (how a check returns ``num_real_reqs[0]``)."""
    cuda.atomic.add(flags, 2 * condition, 1)
    cuda.atomic.min(flags, 2 * condition + 1, value)


@cuda.jit(device=True, inline=True)
def gate_closed_dev(gate):
    """True when the call's value check rejected it: a gated kernel returns before writing."""
    return gate[GATE_WORD] != 0


@cuda.jit(device=True, inline=True)
def claim_epoch_dev(flags):
    """This call's claim epoch (``checks.claim_epoch``), as the int32 the claim tables hold."""
    return np.int32(flags[EPOCH_WORD])


@cuda.jit(device=True, inline=True)
def finish_check_dev(flags, verdict):
    """The last statement of every check kernel, reached by every thread of every block: the
    block that finishes last copies the flags into ``verdict`` (``FLAG_WORDS`` words of mapped
    pinned memory), which the host reads once the kernel is done. This replaces a copy after the
    kernel, which cost about 5 us of GPU time on an H200 (notes/gpu-runs.md, session 10)."""
    last = cuda.shared.array(1, np.int32)
    cuda.threadfence()              # this thread's flags are visible before its block counts as done
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        last[0] = cuda.atomic.add(flags, DONE_WORD, 1) == cuda.gridDim.x - 1
    cuda.syncthreads()
    if last[0]:
        w = cuda.threadIdx.x
        while w < FLAG_WORDS:       # read at the L2 by an atomic: never a stale line of this SM
            verdict[w] = cuda.atomic.add(flags, w, 0)
            w += cuda.blockDim.x


@cuda.jit(device=True, inline=True)
def block_fill_dev(a, n, value, tid, num_threads):
    """``a[0:n] = value``, the ``num_threads`` threads of a block striding over it (no barrier)."""
    i = tid
    while i < n:
        a[i] = value
        i += num_threads


def _flag_init() -> np.ndarray:
    init = np.zeros(DEVICE_WORDS, dtype=np.int64)
    init[1:GATE_WORD:2] = _INT64_MAX
    return init


@functools.cache
def open_gate():
    """The flags of a call that ran no value check (``checks="shapes"``, lessons' hand-built
    calls): all zero, so gated kernels run."""
    return xp.zeros(FLAG_WORDS, dtype=np.int64)


class _StreamFlags:
    """The flags of one stream: device words, their initial value in pinned memory (with the
    epoch word the host sets), the verdict in mapped pinned memory (``verdict`` for the host,
    ``verdict_dev`` for the kernel) and an event. ``unsettled``: a check was enqueued and its
    verdict not yet taken, so its reset copy may still read ``init``."""

    def __init__(self):
        self.flags = xp.asarray(_flag_init())
        self.init = cuda.pinned_array(DEVICE_WORDS, np.int64)
        self.init[:] = _flag_init()
        self.init_ptr = self.init.ctypes.data
        self.verdict = cuda.mapped_array(FLAG_WORDS, np.int64)
        self.verdict_dev = device.mapped_view(self.verdict)
        self.event = xp.cuda.Event(block=False, disable_timing=True)
        self.unsettled = False


_stream_flags: dict = {}


class ValueCheck:
    """An enqueued value check (:func:`start_check`): ``gate`` goes to the call's writing kernels,
    :meth:`verdict` waits for the check alone and returns ``[(count, first_index), ...]``."""

    __slots__ = ("gate", "_out", "_slot")

    def __init__(self, gate, out, slot):
        self.gate, self._out, self._slot = gate, out, slot

    def verdict(self) -> list:
        if self._slot is not None:
            self._slot.event.synchronize()
            self._slot.unsettled = False
        out = self._out
        return [(int(out[2 * c]), int(out[2 * c + 1]) if out[2 * c] else -1)
                for c in range(CHECK_CONDITIONS)]


def start_check(kernel, grid, block, *args, epoch: int = 0) -> ValueCheck:
    """Enqueue the value-check ``kernel`` over ``args`` and return its :class:`ValueCheck`.

    Contract: ``kernel`` takes ``args`` followed by ``flags``, an int64 device array of
    ``DEVICE_WORDS`` entries, and ``verdict``; it reports each bad element with
    ``flag_bad_dev(flags, condition, index)``, reads ``claim_epoch_dev(flags)`` (``epoch``), and
    every thread ends in ``finish_check_dev(flags, verdict)``; its grid is one-dimensional. On a
    GPU the flags of the current stream are reset (a copy from pinned memory, which carries the
    epoch) and the check runs, both enqueued without waiting; its last block writes the verdict
    to pinned memory. The
    launcher then enqueues its writing kernels with ``gate=check.gate``: each starts with
    ``if gate_closed_dev(gate): return``, so a rejected call writes nothing although its kernels
    were already queued. Only :meth:`ValueCheck.verdict` waits, and only for the check, so the
    stream never idles between the check and the kernel (docs/two-worlds.md, "value checks").
    Calls on one stream must take their verdict before the next call's check starts.
    """
    if _BACKEND != "cuda":
        flags, verdict = _flag_init(), np.zeros(FLAG_WORDS, np.int64)
        flags[EPOCH_WORD] = epoch
        device.launch(kernel, grid, block, *args, flags, verdict)
        return ValueCheck(flags, verdict, None)
    stream = _CUPY_CURRENT_STREAM()
    slot = _stream_flags.get(stream.ptr)
    if slot is None:
        slot = _stream_flags[stream.ptr] = _StreamFlags()
    if slot.unsettled:      # the previous check's reset may not have read init yet
        slot.event.synchronize()
    slot.init[EPOCH_WORD] = epoch
    slot.unsettled = True
    runtime = xp.cuda.runtime
    runtime.memcpyAsync(slot.flags.data.ptr, slot.init_ptr, DEVICE_WORDS * 8,
                        runtime.memcpyHostToDevice, stream.ptr)
    device.launch(kernel, grid, block, *args, slot.flags, slot.verdict_dev)
    slot.event.record(stream)
    return ValueCheck(slot.flags, slot.verdict, slot)


def check_flags(kernel, grid, block, *args, epoch: int = 0) -> list:
    """:func:`start_check` and its verdict at once, for checks whose launcher gates nothing."""
    return start_check(kernel, grid, block, *args, epoch=epoch).verdict()
