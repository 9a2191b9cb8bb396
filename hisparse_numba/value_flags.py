"""Device-side value checks: one check kernel per call, its verdict, and the gate of the writers.

A launcher checks the values its kernels index with (ranges, duplicates) on the device in one pass:
:func:`start_check` enqueues the family's check kernel, which reports each bad element with
:func:`flag_bad_dev` and ends with :func:`finish_check_dev`: the block that finishes last writes
the flags straight into pinned host memory (mapped), sets the call's gate, and resets the flags
for the next call, so no copy comes before or after the kernel. The launcher then enqueues its
writing kernels with ``gate=check.gate``; each starts with ``if gate_closed_dev(gate): return``.
Only :meth:`ValueCheck.verdict` waits, and only for the check, so a rejected call writes nothing
and an accepted one never idles the stream (docs/two-worlds.md, "Value checks on the device").
Every ``*_checks.py`` module builds on this.

Shapes: each stream has ``DEVICE_WORDS`` int64 words on the device: ``FLAG_WORDS`` accumulating
ones (``(count, first index)`` per condition, ``CHECK_CONDITIONS`` of them, then the gate word),
``EPOCH_WORD`` (the claim epoch: one more after every check on the stream; :func:`claim_table`),
``DONE_WORD`` (blocks finished) and, from ``GATE_BASE``, the gate the writing kernels read. A
check kernel's arguments are the same objects on every call of a decode loop, so
``device.launch`` reuses their argument list.
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
EPOCH_WORD = FLAG_WORDS           # this check's claim epoch; the check's last block adds one
DONE_WORD = EPOCH_WORD + 1        # blocks of the check kernel that have finished (finish_check_dev)
GATE_BASE = DONE_WORD + 1         # FLAG_WORDS words: the gate view (its GATE_WORD is the last verdict's)
DEVICE_WORDS = GATE_BASE + FLAG_WORDS
EPOCH_LIMIT = 2**31 - 2           # claim tables hold int32 epochs: start again below this


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
def check_rejected_dev(flags):
    """In a check kernel of one block, after ``finish_check_dev`` and a block barrier: True when
    the check rejected the call (the kernel then writes nothing)."""
    return flags[GATE_BASE + GATE_WORD] != 0


@cuda.jit(device=True, inline=True)
def claim_epoch_dev(flags):
    """This call's claim epoch, as the int32 the claim tables (:func:`claim_table`) hold."""
    return np.int32(flags[EPOCH_WORD])


@cuda.jit(device=True, inline=True)
def finish_check_dev(flags, verdict):
    """The last statement of every check kernel, reached by every thread of every block. The
    block that finishes last takes each accumulating word and resets it for the next check in one
    atomic exchange, writes it into ``verdict`` (``FLAG_WORDS`` words of mapped pinned memory,
    which the host reads once the kernel is done) and the gate word into the gate view, then
    advances the claim epoch. No copy comes before or after the kernel: on an H200 the reset and
    read-back copies cost about 2 and 5 us of GPU time (``docs/performance.md``)."""
    last = cuda.shared.array(1, np.int32)
    cuda.threadfence()              # this thread's flags are visible before its block counts as done
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        last[0] = cuda.atomic.add(flags, DONE_WORD, 1) == cuda.gridDim.x - 1
    cuda.syncthreads()
    if last[0]:
        w = cuda.threadIdx.x
        while w < FLAG_WORDS:       # first-index words start at INT64_MAX, the others at 0
            value = cuda.atomic.exch(flags, w, _INT64_MAX if w % 2 == 1 and w < GATE_WORD else 0)
            verdict[w] = value
            if w == GATE_WORD:
                flags[GATE_BASE + GATE_WORD] = value
            w += cuda.blockDim.x
        if cuda.threadIdx.x == 0:
            flags[EPOCH_WORD] += 1
            flags[DONE_WORD] = 0


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
    init[EPOCH_WORD] = 1            # claim tables start at 0: epoch 0 would find every row claimed
    return init


@functools.cache
def open_gate():
    """The flags of a call that ran no value check (``checks="shapes"``, lessons' hand-built
    calls): all zero, so gated kernels run."""
    return xp.zeros(FLAG_WORDS, dtype=np.int64)


class _StreamFlags:
    """The check state of one stream: the device words (``flags``; ``gate``, the view of them the
    writing kernels read), the verdict in mapped pinned memory (``verdict`` for the host,
    ``verdict_dev`` for the kernel), an event behind the last check, the claim ``epoch`` that
    check kernel will find in the flags (the host's count of the kernel's own increments) and the
    stream's claim tables. In the simulator the same, in NumPy."""

    def __init__(self):
        if _BACKEND == "cuda":
            self.flags = xp.asarray(_flag_init())
            self.verdict = cuda.mapped_array(FLAG_WORDS, np.int64)
            self.verdict_dev = device.mapped_view(self.verdict)
            self.event = xp.cuda.Event(block=False, disable_timing=True)
        else:
            self.flags = _flag_init()
            self.verdict = self.verdict_dev = np.zeros(FLAG_WORDS, np.int64)
            self.event = None
        self.gate = self.flags[GATE_BASE:GATE_BASE + FLAG_WORDS]
        self.epoch = 1
        self.tables: dict = {}

    def restart_epochs(self) -> None:
        """Epoch 1 again, with new (zero) claim tables: before the int32 epochs would overflow."""
        if self.event is not None:
            self.event.synchronize()
        self.flags[EPOCH_WORD] = 1
        self.epoch = 1
        self.tables.clear()


_stream_flags: dict = {}


def _stream_slot() -> _StreamFlags:
    ptr = _CUPY_CURRENT_STREAM().ptr if _BACKEND == "cuda" else 0
    slot = _stream_flags.get(ptr)
    if slot is None:
        slot = _stream_flags[ptr] = _StreamFlags()
    if slot.epoch >= EPOCH_LIMIT:
        slot.restart_epochs()
    return slot


def claim_table(rows: int, planes: int = 0):
    """The claim table for a check on the current stream that claims rows ``0..rows-1``: int32,
    ``[rows]`` (or ``[planes, rows]`` for ``planes`` independent claims), at least that large.

    A check kernel proves rows distinct by claiming each with ``cuda.atomic.exch(table, row,
    claim_epoch_dev(flags))``: a row whose previous value is already this epoch is claimed twice.
    Every check on a stream has its own epoch (the check kernel advances it), so a table is
    allocated once per size and stream and never cleared: a check costs no memset and no memory
    that grows with the values."""
    slot = _stream_slot()
    table = slot.tables.get(planes)
    if table is None or table.shape[-1] < rows:
        size = max(int(rows), 0 if table is None else table.shape[-1], 1)
        table = slot.tables[planes] = xp.zeros(size if planes == 0 else (planes, size), dtype=np.int32)
    return table


class ValueCheck:
    """An enqueued value check (:func:`start_check`): ``gate`` goes to the call's writing kernels,
    :meth:`verdict` waits for the check alone and returns ``[(count, first_index), ...]``."""

    __slots__ = ("gate", "_out", "_event")

    def __init__(self, gate, out, event):
        self.gate, self._out, self._event = gate, out, event

    def verdict(self) -> list:
        if self._event is not None:
            self._event.synchronize()
        out = self._out.tolist()     # one read of the mapped words, as Python ints
        return [(out[2 * c], out[2 * c + 1] if out[2 * c] else -1) for c in range(CHECK_CONDITIONS)]


def start_check(kernel, grid, block, *args) -> ValueCheck:
    """Enqueue the value-check ``kernel`` over ``args`` on the current stream and return its
    :class:`ValueCheck`.

    Contract: ``kernel`` takes ``args`` followed by ``flags`` (int64, ``DEVICE_WORDS``) and
    ``verdict``; its grid is one-dimensional; it reports each bad element with
    ``flag_bad_dev(flags, condition, index)``, claims rows of a :func:`claim_table` with
    ``claim_epoch_dev(flags)``, and every thread ends in ``finish_check_dev(flags, verdict)``,
    which leaves the flags ready for the next check. Nothing else is enqueued, and nothing
    waits. The launcher then enqueues its writing kernels with ``gate=check.gate``: each starts
    with ``if gate_closed_dev(gate): return``, so a rejected call writes nothing although its
    kernels were already queued. Only :meth:`ValueCheck.verdict` waits, and only for the check,
    so the stream never idles between the check and the kernel (docs/two-worlds.md, "value
    checks"). Calls on one stream must take their verdict before the next call's check starts.
    """
    slot = _stream_slot()
    device.launch(kernel, grid, block, *args, slot.flags, slot.verdict_dev)
    slot.epoch += 1                 # what the kernel's last block does to the flags
    if slot.event is not None:
        slot.event.record(_CUPY_CURRENT_STREAM())
    return ValueCheck(slot.gate, slot.verdict, slot.event)


def check_flags(kernel, grid, block, *args) -> list:
    """:func:`start_check` and its verdict at once, for checks whose launcher gates nothing."""
    return start_check(kernel, grid, block, *args).verdict()
