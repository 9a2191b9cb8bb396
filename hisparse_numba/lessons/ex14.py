"""Checkers for lesson 14, the kernel puzzles: run the learner's kernel, compare with the reference.

Each ``check_*`` builds small inputs, runs the learner's kernel (or a fixed kernel around the
learner's device function), compares every output byte for byte with the project's NumPy
reference, and prints ``right:``, ``wrong:`` (where it went wrong: which thread touched which
element) or ``not yet:``. In the simulator the launch is recorded (``threadviz``) and a wrong
answer also draws the learner's accesses, the mismatching elements outlined in red.

Inputs live at the front of arenas twice their size, so a missing guard on a GPU reads and
writes the arena's spare half instead of memory it does not own.

Puzzles, easiest first: a: the gather's bounds guard; b: the 16-byte chunk loop of an item copy;
c: the swap-in's hit test; d: the block-wide exclusive scan that numbers misses; e: the kv-canary
hash chain step; f: the verify capacity check of the canary plan, inside a kernel.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from .. import device
from ..device import cuda
from ..hisparse.gather import gather_to_hot_buffer_reference
from ..kv_canary.examples import plan_problem, run_plan
from ..kv_canary.hashing import mix3, to_signed64
from . import threadviz
from .ex00 import LearnerError, NotYet, learner_line, verdict


# --- running the learner's kernel -------------------------------------------------------------


def arena(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` at the front of a zeroed buffer twice its size (a view of its first half)."""
    a = np.ascontiguousarray(a)
    back = np.zeros(2 * a.size, a.dtype)
    back[:a.size] = a.reshape(-1)
    return back[:a.size].reshape(a.shape)


def _to_device_arena(a: np.ndarray):
    """``a`` on the device, keeping the spare half of its arena behind it."""
    root = a.base
    if root is None or root.size != 2 * a.size:
        return device.to_device(a)
    return device.to_device(root)[:a.size].reshape(a.shape)


def _is_stub(fn) -> bool:
    try:
        return "raise NotImplementedError" in inspect.getsource(getattr(fn, "py_func", fn))
    except (OSError, TypeError):
        return False


def launch(kernel, grid, block, args: dict, *, stub_of=None):
    """Run ``kernel[grid, block]`` on ``args`` (name -> NumPy array or scalar), in place.

    Returns the ``threadviz.Trace`` (``None`` on a GPU). The learner's NotImplementedError and
    other exceptions become ``NotYet`` / ``LearnerError`` naming the line of their cell.
    """
    stub_of = stub_of or kernel
    if not device.SIMULATOR and _is_stub(stub_of):      # a GPU kernel cannot raise: read its source
        raise NotYet("the stub still raises NotImplementedError: fill it in")
    try:
        if device.SIMULATOR:
            arrays = [k for k, v in args.items() if isinstance(v, np.ndarray)]
            return threadviz.record(kernel, grid, block, *args.values(), names=arrays)
        dev = {k: _to_device_arena(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
        device.launch(kernel, grid, block, *dev.values())   # compiling it may raise a typing error
        device.synchronize()
        for k, v in dev.items():
            if isinstance(v, np.ndarray) or (device.xp is not np and isinstance(v, device.xp.ndarray)):
                args[k][...] = device.to_host(v)
        return None
    except NotImplementedError as err:
        raise NotYet(str(err).split(": ", 1)[-1]) from None
    except Exception as err:  # noqa: BLE001 - an error inside the learner's kernel is theirs
        raise LearnerError(f"your kernel raised {type(err).__name__}: {err}"
                           f"{learner_line(stub_of, err)}") from None


def where(trace, name: str, index: int, describe) -> str:
    """Who wrote element ``index`` of ``name``: ``"your thread (b, t) wrote ..."`` or nobody."""
    if trace is None:
        return describe(index)
    writes = trace.writers(name).get(index, [])
    if not writes:
        return f"no thread wrote {describe(index)}"
    who = " and ".join(sorted({a.who for a in writes}))
    return f"your thread {who} wrote {describe(index)}"


def compare(trace, name: str, got: np.ndarray, want: np.ndarray, describe, show=lambda v: f"{v}"):
    """``None`` when ``got`` equals ``want`` byte for byte, else ``(message about the first
    difference, flat indices of every differing element)``."""
    g, w = got.reshape(-1), want.reshape(-1)
    bad = np.flatnonzero((g.view(np.uint8).reshape(g.size, -1) != w.view(np.uint8).reshape(w.size, -1)).any(axis=1))
    if bad.size == 0:
        return None
    i = int(bad[0])
    more = f" ({bad.size} elements differ)" if bad.size > 1 else ""
    return f"{where(trace, name, i, describe)}: {show(g[i])} where the reference has {show(w[i])}{more}", bad


def out_of_bounds(trace) -> str | None:
    if trace is None or not trace.out_of_bounds():
        return None
    a = trace.out_of_bounds()[0]
    n = trace.arrays[a.buffer].size
    return (f"your thread {a.who} tried to {a.kind} element {a.index} of {a.buffer}, which has {n} "
            f"(in the simulator an IndexError; on a GPU whatever lies past the end: another buffer's bytes)")


def report(trace, problems, highlight=(), buffers=None, cols=None, expected=None):
    """``(ok, message)`` from the list of problems found; draws the picture when wrong."""
    problems = [p for p in problems if p]
    if not problems:
        return True, None
    if trace is not None:
        import matplotlib.pyplot as plt

        threadviz.draw(trace, buffers, cols=cols, highlight=highlight, expected=expected,
                       title="your kernel's accesses (red outline: a wrong element; red below a grid: "
                             "past its end)")
        plt.show()
    return False, "; ".join(problems)


def show_words(v) -> str:
    """An 8-byte word of a float32 pool, as the two float32 values it holds."""
    a, b = np.array([v], np.uint64).view(np.float32)
    return f"({a:g}, {b:g})"


def _first(msg_or_none, name, trace):
    if msg_or_none is None:
        return None, []
    msg, bad = msg_or_none
    return msg, [(name, int(i)) for i in bad[:64]]


# --- a: the gather's bounds guard -------------------------------------------------------------

GATHER_WORDS = 4                              # 32-byte items


def _gather_case():
    host = (np.arange(10)[:, None] * 100 + np.arange(GATHER_WORDS * 2)[None]).astype(np.float32)
    buf = np.full((6, GATHER_WORDS * 2), -1, np.float32)
    return host, buf, np.array([7, 2, 5], np.int64), np.array([4, 1, 3], np.int64)


@verdict
def check_gather_guard(gather_words_kernel):
    """``gather_words_kernel(src_words, dst_words, src_locs, dst_locs, words_per_item)``: one thread per word."""
    host, buf, src, dst = _gather_case()
    want = buf.copy()
    gather_to_hot_buffer_reference(host_cache=host, device_buffer=want, src_locs=src, dst_locs=dst,
                                   item_size_bytes=GATHER_WORDS * 8)
    args = dict(src_words=arena(device.byte_words(host)), dst_words=arena(device.byte_words(buf)),
                src_locs=arena(src), dst_locs=arena(dst), words_per_item=GATHER_WORDS)
    trace = launch(gather_words_kernel, 2, 8, args)     # 16 threads for 12 words: 4 too many
    describe = lambda i: f"word {i} of dst_words (row {i // GATHER_WORDS}, chunk {i % GATHER_WORDS // 2})"
    msg, hl = _first(compare(trace, "dst_words", args["dst_words"], device.byte_words(want), describe,
                             show_words),
                     "dst_words", trace)
    changed = {"dst_words": device.byte_words(want) != device.byte_words(buf)}
    ok, message = report(trace, [out_of_bounds(trace), msg], hl, ["src_locs", "dst_locs", "dst_words"],
                         cols=GATHER_WORDS, expected=changed)
    return ok, message or "right: 16 threads, 12 words: the 4 threads past the end return before touching anything"


# --- b: the 16-byte chunk loop ----------------------------------------------------------------

CHUNK_LANES = 4
CHUNK_WORDS = 10                              # 80-byte items: 5 chunks, one more than the lanes


@functools.cache
def _copy_kernel(copy_item_dev):
    @cuda.jit
    def copy_items(src_words, dst_words, src_locs, dst_locs, words_per_item):
        group = cuda.threadIdx.x // CHUNK_LANES
        if group < src_locs.shape[0]:
            copy_item_dev(src_words, src_locs[group], dst_words, dst_locs[group], words_per_item,
                          cuda.threadIdx.x % CHUNK_LANES, CHUNK_LANES)
    return copy_items


@verdict
def check_chunk_loop(copy_item_dev):
    """``copy_item_dev(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes)``."""
    host = (np.arange(8)[:, None] * 100 + np.arange(CHUNK_WORDS * 2)[None]).astype(np.float32)
    buf = np.full((5, CHUNK_WORDS * 2), -1, np.float32)
    src, dst = np.array([6, 1, 3], np.int64), np.array([2, 4, 0], np.int64)
    want = buf.copy()
    gather_to_hot_buffer_reference(host_cache=host, device_buffer=want, src_locs=src, dst_locs=dst,
                                   item_size_bytes=CHUNK_WORDS * 8)
    args = dict(src_words=arena(device.byte_words(host)), dst_words=arena(device.byte_words(buf)),
                src_locs=arena(src), dst_locs=arena(dst), words_per_item=CHUNK_WORDS)
    trace = launch(_copy_kernel(copy_item_dev), 1, CHUNK_LANES * 3, args, stub_of=copy_item_dev)
    describe = lambda i: f"word {i} of dst_words (row {i // CHUNK_WORDS}, chunk {i % CHUNK_WORDS // 2})"
    msg, hl = _first(compare(trace, "dst_words", args["dst_words"], device.byte_words(want), describe,
                             show_words),
                     "dst_words", trace)
    problems = [out_of_bounds(trace), msg]
    if trace is not None and msg is None:
        by_chunk: dict = {}
        for a in trace.of("dst_words", "write", True):
            by_chunk.setdefault(a.index // 2, set()).add(a.thread[0])
        for chunk, threads in sorted(by_chunk.items()):
            row, c = divmod(chunk, CHUNK_WORDS // 2)
            lane = c % CHUNK_LANES
            if len(threads) > 1:
                problems.append(f"chunk {c} of row {row} was written by threads {sorted(threads)} of block 0: "
                                "one lane must move both words of a chunk (one 16-byte store on a GPU), and "
                                "each chunk once")
                hl = [("dst_words", 2 * chunk), ("dst_words", 2 * chunk + 1)]
                break
            (thread,) = threads
            if thread % CHUNK_LANES != lane:
                problems.append(f"chunk {c} of row {row} was moved by thread {thread} (lane "
                                f"{thread % CHUNK_LANES}); lane {lane} owns it (lane l moves chunks l, "
                                "l + num_lanes, ...)")
                hl = [("dst_words", 2 * chunk), ("dst_words", 2 * chunk + 1)]
                break
    changed = {"dst_words": device.byte_words(want) != device.byte_words(buf)}
    ok, message = report(trace, problems, hl, ["src_locs", "dst_words"], cols=CHUNK_WORDS, expected=changed)
    return ok, message or ("right: lane l moves chunks l, l + 4, ...; 5 chunks per item, so lane 0 moves two "
                           "and every chunk moves once, as one 16-byte pair of words")


# --- c: the swap-in's hit test ----------------------------------------------------------------

HIT_H, HIT_K = 6, 4


def hit_case():
    """Two requests' slot tables and selections. Column ``H`` is the newest token's row, not a hot slot."""
    tags = np.array([[4, 9, 1, 7, 12, 3, 15],           # request 0: newest (15) in column H
                     [2, 8, 5, 0, 11, 6, 13]], np.int32)
    locs = np.array([[10, 3, 7, 0, 5, 8, 1],
                     [2, 11, 4, 6, 9, 12, 13]], np.int32)
    top_k = np.array([[7, 15, 3, 13],                   # request 0: hit, newest, hit, miss
                      [13, 8, 7, 14]], np.int32)         # request 1: miss (stale tag in column H), hit, miss, newest
    seq_lens = np.array([16, 15], np.int32)
    return tags, locs, top_k, seq_lens


def hit_rows_reference(tags, locs, top_k, seq_lens):
    """Device row each lane reads: the newest token's row, a hit's slot row, or -1 for a miss."""
    out = np.full(top_k.shape, -1, np.int32)
    for r in range(top_k.shape[0]):
        for k, pos in enumerate(top_k[r]):
            if pos == seq_lens[r] - 1:
                out[r, k] = locs[r, HIT_H]
            else:
                slots = np.flatnonzero(tags[r, :HIT_H] == pos)
                out[r, k] = locs[r, slots[0]] if slots.size else -1
    return out


@functools.cache
def _hit_kernel(find_slot_dev):
    @cuda.jit
    def lookup(tags, locs, top_k, seq_lens, rows):
        r = cuda.blockIdx.x
        k = cuda.threadIdx.x
        pos = top_k[r, k]
        if pos == seq_lens[r] - 1:
            rows[r, k] = locs[r, HIT_H]
        else:
            s = find_slot_dev(tags, r, HIT_H, pos)
            rows[r, k] = locs[r, s] if s >= 0 else -1
    return lookup


@verdict
def check_hit_test(find_slot_dev):
    """``find_slot_dev(tags, r, hot_buffer_size, position) -> slot`` of request ``r`` holding ``position``, or -1."""
    tags, locs, top_k, seq_lens = hit_case()
    want = hit_rows_reference(tags, locs, top_k, seq_lens)
    args = dict(tags=arena(tags), locs=arena(locs), top_k=arena(top_k), seq_lens=arena(seq_lens),
                rows=arena(np.full(top_k.shape, -2, np.int32)))
    trace = launch(_hit_kernel(find_slot_dev), 2, HIT_K, args, stub_of=find_slot_dev)

    def describe(i):
        r, k = divmod(i, HIT_K)
        return f"rows[{r}, {k}] (request {r}, lane {k}, position {top_k[r, k]})"
    msg, hl = _first(compare(trace, "rows", args["rows"], want, describe), "rows", trace)
    if msg and trace is not None:
        reads = sorted({a.index % (HIT_H + 1) for a in trace.of("tags", "read") if a.index // (HIT_H + 1) !=
                        a.block[0]})
        if reads:
            msg += "; request r's threads read another request's tags row (index tags[r, s])"
        elif any(a.index % (HIT_H + 1) == HIT_H for a in trace.of("tags", "read")):
            msg += "; column H of tags is the newest token's column, not a hot slot: search slots 0..H-1"
    ok, message = report(trace, [out_of_bounds(trace), msg], hl, ["tags", "rows"])
    return ok, message or "right: a hit is the slot whose tag equals the position; -1 sends the lane to the miss path"


# --- d: the block-wide exclusive scan that numbers misses -------------------------------------

SCAN_THREADS = 16
SCAN_CASES = [[0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1],
              [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
              [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]]


def miss_numbers_reference(is_miss):
    """(rank of each miss among the misses before it, -1 for a hit; number of misses)."""
    is_miss = np.asarray(is_miss, np.int64)
    exclusive = np.cumsum(is_miss) - is_miss
    return np.where(is_miss == 1, exclusive, -1).astype(np.int64), np.array([is_miss.sum()], np.int64)


@verdict
def check_miss_scan(number_misses):
    """``number_misses(is_miss, miss_rank, miss_total)`` with one block of 16 threads."""
    for case in SCAN_CASES:
        want_rank, want_total = miss_numbers_reference(case)
        args = dict(is_miss=arena(np.array(case, np.int32)), miss_rank=arena(np.full(SCAN_THREADS, -7, np.int64)),
                    miss_total=arena(np.zeros(1, np.int64)))
        trace = launch(number_misses, 1, SCAN_THREADS, args)

        def describe(i):
            before = [t for t in range(i) if case[t]]
            what = f"a miss with {len(before)} misses before it" if case[i] else "a hit"
            return f"miss_rank[{i}] (thread {i}: {what})"
        msg, hl = _first(compare(trace, "miss_rank", args["miss_rank"], want_rank, describe), "miss_rank", trace)
        if msg is None:
            m = compare(trace, "miss_total", args["miss_total"], want_total, lambda i: "miss_total[0]")
            msg, hl = _first(m, "miss_total", trace)
        ok, message = report(trace, [out_of_bounds(trace), msg and f"is_miss {case}: {msg}"], hl,
                             ["is_miss", "miss_rank", "miss_total"])
        if not ok:
            return ok, message
    return True, ("right: log2(16) = 4 rounds of add-the-value-offset-to-the-left, a barrier between reading and "
                  "writing; the exclusive rank is the inclusive sum minus your own value")


# --- e: the kv-canary hash chain step ---------------------------------------------------------


def chain_case():
    prev = np.array([to_signed64(h) for h in (0xDE7FAE23A9A1B716, 1, 0x8000000000000000, 12345,
                                              0xFFFFFFFFFFFFFFFF, 42)], np.int64)
    tokens = np.array([101, 7, -1, 0, 2 ** 40, 9], np.int64)
    positions = np.array([0, 1, 2, 3, 4, 5], np.int64)
    return prev, tokens, positions


@functools.cache
def _chain_kernel(mix3_dev):
    @cuda.jit
    def chain_step(prev, tokens, positions, next_hash):
        t = cuda.threadIdx.x
        if t < prev.shape[0]:
            next_hash[t] = np.int64(mix3_dev(prev[t], tokens[t], positions[t]))
    return chain_step


@verdict
def check_chain_step(mix3_dev):
    """``mix3_dev(prev_hash, token, position) -> uint64``: ``H(H(H(prev) ^ token) ^ position)``."""
    prev, tokens, positions = chain_case()
    want = np.array([to_signed64(mix3(a, b, c)) for a, b, c in zip(prev, tokens, positions)], np.int64)
    args = dict(prev=arena(prev), tokens=arena(tokens), positions=arena(positions),
                next_hash=arena(np.zeros(prev.size, np.int64)))
    trace = launch(_chain_kernel(mix3_dev), 1, 8, args, stub_of=mix3_dev)
    describe = lambda i: (f"next_hash[{i}] (slot {i}: prev_hash {int(prev[i]) & (2**64 - 1):#x}, token "
                          f"{tokens[i]}, position {positions[i]})")
    msg, hl = _first(compare(trace, "next_hash", args["next_hash"], want, describe,
                             show=lambda v: f"{int(v) & (2**64 - 1):#018x}"), "next_hash", trace)
    ok, message = report(trace, [out_of_bounds(trace), msg], hl, ["next_hash"])
    return ok, message or ("right: three splitmix64 rounds, every operand uint64; the next slot stores this as its "
                           "prev_hash, so one flipped token changes every hash after it")


# --- f: the verify capacity check, inside a kernel --------------------------------------------

PLAN_THREADS = 32


def plan_cases():
    """(req_pool_indices, prefix_lens, swa_window_size, verify_capacity): fits, exactly fits, overflows."""
    rpi, prefix = [3, 0, 1, 2, 0, 5], [6, 4, 9, 0, 2, 3]      # rows 1 and 4 are padding rows
    return [(rpi, prefix, 0, 32), (rpi, prefix, 4, 11), (rpi, prefix, 0, 17)]


def capacity_reference(rpi, prefix, swa, cap):
    """(exclusive verify offsets of the rows + total, verify_num_valid, enable) from the plan reference."""
    problem = plan_problem(rpi, prefix, [1] * len(rpi), max_seq_len=16, swa_window_size=swa,
                           full_to_swa_index_mapping=np.arange(6 * 16, dtype=np.int64) if swa else None)
    plan = run_plan(problem, cap, len(rpi), kernel=False)
    counts = []
    for rp, p in zip(rpi, prefix):
        start = max(p - swa, 0) if swa > 0 else 0
        counts.append(0 if rp == 0 else max(p - start, 0))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    assert offsets[-1] == problem.needed_verify_entries()
    return offsets, plan["verify_num_valid"].astype(np.int32), plan["enable"].astype(np.int32)


@verdict
def check_verify_capacity(verify_capacity_kernel):
    """``verify_capacity_kernel(req_pool_indices, prefix_lens, swa_window_size, verify_capacity,
    verify_offsets, verify_num_valid, enable)`` with one block of 32 threads."""
    for rpi, prefix, swa, cap in plan_cases():
        offsets, num_valid, enable = capacity_reference(rpi, prefix, swa, cap)
        args = dict(req_pool_indices=arena(np.array(rpi, np.int64)), prefix_lens=arena(np.array(prefix, np.int64)),
                    swa_window_size=swa, verify_capacity=cap,
                    verify_offsets=arena(np.full(len(rpi) + 1, -7, np.int64)),
                    verify_num_valid=arena(np.full(1, -7, np.int32)), enable=arena(np.full(1, -7, np.int32)))
        trace = launch(verify_capacity_kernel, 1, PLAN_THREADS, args)
        case = f"req_pool_indices {rpi}, prefix_lens {prefix}, swa_window_size {swa}, verify_capacity {cap}"
        msg, hl = None, []
        for name, want in (("verify_offsets", offsets), ("verify_num_valid", num_valid), ("enable", enable)):
            describe = (lambda i, name=name: f"{name}[{i}]" + (" (the total)" if name == "verify_offsets" and
                                                                i == len(rpi) else ""))
            msg, hl = _first(compare(trace, name, args[name], want, describe), name, trace)
            if msg:
                break
        ok, message = report(trace, [out_of_bounds(trace), msg and f"{case}: {msg}"], hl,
                             ["req_pool_indices", "prefix_lens", "verify_offsets", "verify_num_valid", "enable"])
        if not ok:
            return ok, message
    return True, ("right: padding rows verify nothing, an SWA window verifies only its last W positions, and the "
                  "plan is enabled only when the total fits (equal is fine)")

