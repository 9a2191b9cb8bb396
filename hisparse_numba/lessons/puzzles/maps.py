"""Lesson 14's one-thread-one-element puzzles: the gather's guard, the chunk loop, the chain step.

* ``GATHER`` (14-a): ``gather_words(src_words, dst_words, src_locs, dst_locs, words_per_item)``,
  one thread per 8-byte word of all the pairs; threads past the last word touch nothing. Reference:
  ``gather_to_hot_buffer_reference``. Pools are float32 items seen as uint64 words.
* ``CHUNKS`` (14-b): ``copy_item_dev(src_words, src_loc, dst_words, dst_loc, words_per_item, lane,
  num_lanes)``: lane ``l`` moves the 16-byte chunks ``l, l + num_lanes, ...`` of one item (chunk
  ``c`` = words ``2c, 2c + 1``, one thread), as ``hisparse_numba/itemcopy.py``.
* ``CHAIN`` (14-d): ``mix3_dev(prev_hash, token, position) -> uint64``, the kv-canary chain step
  ``H(H(H(prev) ^ token) ^ position)``. Reference: ``kv_canary.hashing.mix3``.
"""

from __future__ import annotations

import functools

import numpy as np

from ... import device
from ...device import cuda
from ...hisparse.gather import gather_to_hot_buffer_reference
from ...kv_canary.hashing import mix3, to_signed64
from .harness import POISON, Case, Puzzle, show_word_pair

# --- 14-a: the gather's bounds guard ----------------------------------------------------------


def _pools(host_items: int, rows: int, words: int):
    host = (np.arange(host_items)[:, None] * 100 + np.arange(2 * words)[None]).astype(np.float32)
    return host, np.full((rows, 2 * words), POISON, np.float32)


def gather_case(name, about, src, dst, words, grid, block, *, host_items=12, rows=8) -> Case:
    """A gather of ``src -> dst`` items of ``words`` 8-byte words, in float32 pools."""
    host, buf = _pools(host_items, rows, words)
    src, dst = np.array(src, np.int64), np.array(dst, np.int64)
    want = buf.copy()
    gather_to_hot_buffer_reference(host_cache=host, device_buffer=want, src_locs=src, dst_locs=dst,
                                   item_size_bytes=words * 8)
    args = dict(src_words=device.byte_words(host), dst_words=device.byte_words(buf), src_locs=src,
                dst_locs=dst, words_per_item=words)
    return Case(name, grid, block, args, {"dst_words": device.byte_words(want).copy()}, about)


@functools.cache
def gather_cases():
    return [
        gather_case("the lesson's example", "3 pairs of 4 words = 12 words; 2 blocks of 8 threads",
                    [7, 2, 5], [4, 1, 3], 4, 2, 8),
        gather_case("one word short of whole blocks", "5 pairs of 6 words = 30 words; 4 blocks of 8",
                    [0, 11, 3, 9, 6], [2, 7, 0, 5, 1], 6, 4, 8),
        gather_case("whole blocks", "4 pairs of 4 words = 16 words; 2 blocks of 8: no spare thread",
                    [1, 2, 3, 4], [0, 2, 4, 6], 4, 2, 8),
        gather_case("one pair", "1 pair of 2 words; 1 block of 8", [10], [3], 2, 1, 8),
        gather_case("many blocks", "6 pairs of 2 words = 12 words; 5 blocks of 4",
                    [5, 4, 3, 2, 1, 0], [7, 6, 5, 4, 3, 2], 2, 5, 4),
    ]


def _items(case, a):
    """A float32 pool seen as uint64 words, shown as its float32 items (a row per item)."""
    return a.view(np.float32).reshape(-1, 2 * case.args["words_per_item"]) if a.dtype == np.uint64 else a


def _describe_word(case, name, flat):
    w = case.args["words_per_item"]
    if name == "dst_words":
        return f"word {flat} of dst_words (device row {flat // w}, chunk {flat % w // 2})"
    return None


GATHER = Puzzle(
    key="14-a", cases=gather_cases, describe=_describe_word, value=show_word_pair, as_values=_items,
    work={"dst_words": ("write", 1)}, draw=("src_locs", "dst_locs", "dst_words"), cols=None,
    right="every thread past the last word returns before touching anything, whatever the sizes",
    hints=(
        "How many words are there in all? Compare the thread's i with that, not with a number.",
        "The words are src_locs.shape[0] * words_per_item; threads with i at or past that have no "
        "word. Wrap the three lines that use i in an if.",
        "if i < src_locs.shape[0] * words_per_item:  (then the pair, w and the copy, indented)",
    ),
)


# --- 14-b: the 16-byte chunk loop -------------------------------------------------------------


@functools.cache
def chunk_kernel(copy_item_dev):
    """One group of ``num_lanes`` threads per pair, calling the learner's device function."""
    @cuda.jit
    def copy_items(src_words, dst_words, src_locs, dst_locs, words_per_item, num_lanes):
        g = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        group = g // num_lanes
        if group < src_locs.shape[0]:
            copy_item_dev(src_words, src_locs[group], dst_words, dst_locs[group], words_per_item,
                          g % num_lanes, num_lanes)
    return copy_items


def chunk_case(name, about, src, dst, words, lanes, grid, block) -> Case:
    case = gather_case(name, about, src, dst, words, grid, block)
    case.args["num_lanes"] = lanes
    return case


@functools.cache
def chunk_cases():
    return [
        chunk_case("the lesson's example", "80-byte items = 5 chunks, 4 lanes: lane 0 moves two",
                   [6, 1, 3], [2, 4, 0], 10, 4, 1, 12),
        chunk_case("fewer chunks than lanes", "32-byte items = 2 chunks, 4 lanes: lanes 2, 3 idle",
                   [9, 0], [5, 1], 4, 4, 1, 8),
        chunk_case("many chunks per lane", "160-byte items = 10 chunks, 2 lanes: 5 each",
                   [3, 8], [0, 6], 20, 2, 1, 4),
        chunk_case("one chunk", "16-byte items, 8 lanes", [4], [7], 2, 8, 1, 8),
        chunk_case("several blocks", "5 pairs of 48-byte items = 3 chunks, 4 lanes; 2 blocks of 12",
                   [11, 2, 7, 5, 0], [1, 3, 5, 7, 0], 6, 4, 2, 12),
    ]


def _chunk_owners(run):
    """Every chunk moved once, whole, by the lane that owns it (only the simulator sees who)."""
    words, lanes = run.case.args["words_per_item"], run.case.args["num_lanes"]
    by_chunk: dict = {}
    for a in run.trace.of("dst_words", "write", True):
        by_chunk.setdefault(a.index // 2, set()).add((a.block[0], a.thread[0]))
    block = run.case.block
    for chunk, movers in sorted(by_chunk.items()):
        row, c = divmod(chunk, words // 2)
        cells = [("dst_words", 2 * chunk), ("dst_words", 2 * chunk + 1)]
        if len(movers) > 1:
            return (f"chunk {c} of device row {row} was written by threads {sorted(movers)}: one lane "
                    "moves both words of a chunk (one 16-byte store on a GPU), and each chunk once"), cells
        ((b, t),) = movers
        lane = (b * block + t) % lanes
        if c % lanes != lane:
            return (f"chunk {c} of device row {row} was moved by thread ({b}, {t}), lane {lane}; lane "
                    f"{c % lanes} owns it (lane l moves chunks l, l + num_lanes, ...)"), cells
    return None


CHUNKS = Puzzle(
    key="14-b", cases=chunk_cases, wrap=chunk_kernel, describe=_describe_word, value=show_word_pair,
    as_values=_items,
    extra=_chunk_owners, draw=("src_locs", "dst_words"),
    right="lane l moves chunks l, l + num_lanes, ... for any item size and any number of lanes, "
          "every chunk once, as one 16-byte pair of words",
    hints=(
        "A lane does not know in advance how many chunks it moves: loop while there is a chunk.",
        "Chunk c is words 2c and 2c + 1 of the item, and item loc starts at word loc * words_per_item. "
        "Start at word 2 * lane and step 2 * num_lanes words until you pass words_per_item.",
        "w = 2 * lane; while w < words_per_item: copy word w and word w + 1 of the item "
        "(dst_words[dst_loc * words_per_item + w] = src_words[src_loc * words_per_item + w], ...); "
        "w += 2 * num_lanes",
    ),
)


# --- 14-d: the kv-canary hash chain step ------------------------------------------------------


@functools.cache
def chain_kernel(mix3_dev):
    @cuda.jit
    def chain_step(prev, tokens, positions, next_hash):
        t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if t < prev.shape[0]:
            next_hash[t] = np.int64(mix3_dev(prev[t], tokens[t], positions[t]))
    return chain_step


def chain_case(name, about, prev, tokens, positions, grid, block) -> Case:
    prev = np.array([to_signed64(h) for h in prev], np.int64)
    tokens, positions = np.array(tokens, np.int64), np.array(positions, np.int64)
    want = np.array([to_signed64(mix3(a, b, c)) for a, b, c in zip(prev, tokens, positions)], np.int64)
    args = dict(prev=prev, tokens=tokens, positions=positions,
                next_hash=np.full(prev.size, POISON, np.int64))
    return Case(name, grid, block, args, {"next_hash": want}, about)


@functools.cache
def chain_cases():
    return [
        chain_case("the lesson's example", "6 rows, large and negative fields",
                   [0xDE7FAE23A9A1B716, 1, 0x8000000000000000, 12345, 0xFFFFFFFFFFFFFFFF, 42],
                   [101, 7, -1, 0, 2 ** 40, 9], [0, 1, 2, 3, 4, 5], 1, 8),
        chain_case("one row", "the first row of a request: prev_hash 0", [0], [5], [0], 1, 4),
        chain_case("several blocks", "10 rows, 3 blocks of 4", list(range(10)), [3] * 10,
                   list(range(100, 110)), 3, 4),
    ]


def _describe_hash(case, name, flat):
    if name != "next_hash":
        return None
    prev = int(case.args["prev"][flat]) & (2 ** 64 - 1)
    return (f"next_hash[{flat}] (prev_hash {prev:#x}, token {case.args['tokens'][flat]}, position "
            f"{case.args['positions'][flat]})")


CHAIN = Puzzle(
    key="14-d", cases=chain_cases, wrap=chain_kernel, describe=_describe_hash,
    value=lambda v: "POISON (never written)" if v == POISON else f"{int(v) & (2 ** 64 - 1):#018x}",
    draw=("prev", "tokens", "positions", "next_hash"),
    right="three splitmix64 rounds, every operand uint64; the next row stores this as its prev_hash, "
          "so one flipped token changes every hash after it",
    hints=(
        "Three rounds of H, one per field, in the order prev_hash, token, position.",
        "acc = H(prev); acc = H(acc ^ token); return H(acc ^ position). The fields are int64: make each "
        "a uint64 with np.uint64(...) before the ^ (int64 ^ uint64 is not a uint64 in Numba).",
        "acc = splitmix64_dev(np.uint64(prev_hash)); acc = splitmix64_dev(acc ^ np.uint64(token)); "
        "return splitmix64_dev(acc ^ np.uint64(position))",
    ),
)
