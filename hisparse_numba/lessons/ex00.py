"""Checkers for lesson 00 (the hot buffer): threads of the gather, the next copy, the next misses.

Every checker prints one line starting with ``right:``, ``wrong:`` or ``not yet:`` and returns
True only for ``right``. Checkers never trust the notebook's live buffers: they rebuild the
lesson's state from its recipe (``lesson_pools``) and judge the learner's answer on a fresh copy,
so a wrong attempt that already changed the notebook's buffer cannot make a right one look wrong.
"""

from __future__ import annotations

import sys
import traceback

import numpy as np

from .. import device
from ..hisparse.gather import GROUPS_PER_BLOCK, LANES, gather_kernel, gather_to_hot_buffer_reference
from . import threadviz
from .common import miss_slots_and_lru

NUM_HOST_ITEMS, HOT_ROWS, D = 24, 6, 8
ITEM_SIZE_BYTES = D * 4
FIRST_SRC, FIRST_DST = [17, 3, 9, 22], [4, 0, 5, 2]


class NotYet(Exception):
    """The learner's code raised NotImplementedError: the stub is still there."""


class LearnerError(Exception):
    """The learner's own code raised; ``str`` says what and where."""


def learner_call(fn, *args, **kwargs):
    """Call the learner's ``fn``; their exceptions become ``NotYet`` / ``LearnerError``, and so
    does ``None`` (no function yet, or one without a ``return`` yet) ``NotYet``."""
    if fn is None or fn is ...:
        raise NotYet("pass your function to the checker")
    try:
        answer = fn(*args, **kwargs)
    except NotImplementedError as err:
        raise NotYet(str(err)) from None
    except Exception as err:  # noqa: BLE001 - any error in the learner's code is theirs to see
        raise LearnerError(f"your code raised {type(err).__name__}: {err}{learner_line(fn, err)}") from None
    if answer is None:
        raise NotYet(f"{getattr(fn, '__name__', 'your function')} returned None: finish it with a return statement")
    return answer


def learner_line(fn, err) -> str:
    """`` (line N of your cell)`` for the deepest frame of ``err`` in ``fn``'s source, else ``""``."""
    code = getattr(getattr(fn, "py_func", fn), "__code__", None)
    if code is None:
        return ""
    lines = [f.lineno for f in traceback.extract_tb(err.__traceback__) if f.filename == code.co_filename]
    return f" (line {lines[-1]} of your cell)" if lines else ""


def verdict(check):
    """Decorator: a checker body that returns ``(ok, message)``; prints and returns ``ok``. An
    argument still ``None`` (or ``...``) is ``not yet``."""
    def run(*args, **kwargs):
        try:
            if any(a is None or a is ... for a in args):
                raise NotYet("pass your function to the checker")
            ok, message = check(*args, **kwargs)
        except NotYet as err:
            ok, message = False, f"not yet: {err}"
        except LearnerError as err:
            ok, message = False, f"wrong: {err}"
        print(message if message.startswith(("right", "wrong", "not yet")) else
              ("right: " if ok else "wrong: ") + message)
        sys.stdout.flush()
        return ok
    run.__doc__, run.__name__ = check.__doc__, check.__name__
    return run


def lesson_pools():
    """``(host_cache, device_buffer)`` as NumPy, after the lesson's first gather.

    Host item ``p`` holds ``p + column / 100``; the device buffer starts at -1 and the first
    gather copies tokens ``[17, 3, 9, 22]`` into rows ``[4, 0, 5, 2]``.
    """
    host = (np.arange(NUM_HOST_ITEMS)[:, None] + np.arange(D)[None, :] / 100).astype(np.float32)
    buf = np.full((HOT_ROWS, D), -1.0, np.float32)
    gather_to_hot_buffer_reference(host_cache=host, device_buffer=buf, src_locs=np.array(FIRST_SRC, np.int64),
                                   dst_locs=np.array(FIRST_DST, np.int64), item_size_bytes=ITEM_SIZE_BYTES)
    return host, buf


# --- exercise 00-a: which thread moves what --------------------------------------------------


def record_first_gather():
    """The lesson's first gather, run with every access recorded (``None`` on a GPU)."""
    host, _ = lesson_pools()
    buf = np.full((HOT_ROWS, D), -1.0, np.float32)
    blocks = -(-len(FIRST_SRC) // GROUPS_PER_BLOCK)
    return threadviz.record(gather_kernel, blocks, GROUPS_PER_BLOCK * LANES, device.byte_words(host),
                            device.byte_words(buf), np.array(FIRST_SRC, np.int64),
                            np.array(FIRST_DST, np.int64), ITEM_SIZE_BYTES // 8,
                            names=["host_words", "device_words", "src_locs", "dst_locs"])


def pair_and_chunk_truth(block: int, thread: int):
    """``(pair, first chunk)`` gather thread ``(block, thread)`` handles (``pair`` may be past the end)."""
    return block * GROUPS_PER_BLOCK + thread // LANES, thread % LANES


@verdict
def check_pair_and_chunk(pair_and_chunk):
    """``pair_and_chunk(block, thread) -> (pair, chunk)`` for the gather's launch geometry."""
    for block, thread in [(0, 0), (0, 1), (0, 33), (0, 255), (1, 0), (1, 70), (3, 130)]:
        got = learner_call(pair_and_chunk, block, thread)
        want = pair_and_chunk_truth(block, thread)
        try:
            got = (int(got[0]), int(got[1]))
        except (TypeError, ValueError, IndexError):
            return False, f"return a (pair, chunk) tuple of two ints, got {got!r}"
        if got != want:
            hint = ("the block matters: block b starts at pair b * 8" if got[0] == thread // LANES and block
                    else "a pair belongs to a group of 32 threads, not to one thread" if got[0] != want[0]
                    else "the chunk is the thread's lane within its group of 32")
            return False, (f"thread ({block}, {thread}) handles pair {want[0]} from chunk {want[1]}, "
                           f"you said {got} ({hint})")
    if device.SIMULATOR:                      # only the simulator can record who wrote what
        trace = record_first_gather()
        for a in trace.of("device_words", "write"):
            pair, chunk = learner_call(pair_and_chunk, a.block[0], a.thread[0])
            if FIRST_DST[int(pair)] * ITEM_SIZE_BYTES // 16 + int(chunk) != threadviz.chunk_of(trace, a):
                return False, f"thread {a.who} wrote chunk {threadviz.chunk_of(trace, a)}, not what you predict"
    return True, "right: pair = block * 8 + thread // 32, and lane thread % 32 moves chunks lane, lane + 32, ..."


# --- exercise 00-b: the next copy -------------------------------------------------------------


@verdict
def check_next_copy(next_copy):
    """``next_copy() -> (src, dst)``: step two selects tokens [3, 5]; only token 5 must move, to row 1."""
    answer = learner_call(next_copy)
    try:
        src, dst = answer
        src = np.asarray(src)
        dst = np.asarray(dst)
    except (TypeError, ValueError):
        return False, f"next_copy() must return (src, dst), two arrays, got {answer!r}"
    if src.dtype != np.int64 or dst.dtype != np.int64 or src.ndim != 1 or src.shape != dst.shape:
        return False, (f"src and dst must be 1-D int64 arrays of one length (the launcher's rule), got "
                       f"{src.dtype}{list(src.shape)} and {dst.dtype}{list(dst.shape)}")
    host, before = lesson_pools()
    after = before.copy()                                 # a fresh copy: the notebook's buffer is not used
    try:
        gather_to_hot_buffer_reference(host_cache=host, device_buffer=after, src_locs=src, dst_locs=dst,
                                       item_size_bytes=ITEM_SIZE_BYTES)
    except ValueError as err:
        return False, f"the launcher rejects it: {err}"
    tokens = [int(t) if t >= 0 else None for t in after[:, 0]]
    if tokens[0] != 3:
        return False, f"row 0 held token 3, which this step reads; your copy left token {tokens[0]} there"
    if tokens[1] != 5:
        return False, f"token 5 must land in the free row 1; after your copy row 1 holds {tokens[1] if tokens[1] is not None else 'nothing (-1)'}"
    if not np.array_equal(after[2:], before[2:]):
        changed = [r for r in range(2, HOT_ROWS) if not np.array_equal(after[r], before[r])]
        return False, f"rows {changed} changed: only the free row 1 may be written"
    if src.size != 1:
        return False, (f"{src.size} copies: token 3 is already resident in row 0, copying it again costs a "
                       "transfer over PCIe for nothing (only misses move)")
    return True, "right: one copy, host item 5 -> row 1; token 3 stays resident in row 0"


# --- exercise 00-c: where the next misses go (the swap-in) ------------------------------------


@verdict
def check_misses(problem: dict, predict):
    """``predict() -> (miss_slots, lru_after)`` for the next swap-in step of ``problem``."""
    answer = learner_call(predict)
    try:
        miss_slots, lru_after = answer
        miss_slots, lru_after = [int(s) for s in miss_slots], [int(s) for s in lru_after]
    except (TypeError, ValueError):
        return False, f"predict() must return (miss_slots, lru_after), two lists of ints, got {answer!r}"
    want_slots, want_lru = miss_slots_and_lru(problem)
    if miss_slots != want_slots:
        return False, (f"the misses do not take slots {miss_slots} (hint: the m-th miss, in lane order, "
                       "takes the m-th least recently used slot that holds no selected position)")
    if lru_after != want_lru:
        return False, (f"lru_slots does not become {lru_after} (hint: unused evictable slots first, then "
                       "the slots just filled, in miss order, then the hits)")
    return True, f"right: the misses take slots {want_slots} and lru_slots becomes {want_lru}"
