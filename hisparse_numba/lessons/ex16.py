"""Lesson 16 (the kernel ladder): the rungs' code side by side, each rung against the reference, the
shared memory each rung needs, the measured time of each rung, and the checker of the exercise.

The exercise takes version 2's step on one stage of version 1: the hit stage (which lane selected
the position a hot slot holds) through a shared-memory hash of the selected positions instead of a
scan over the K lanes. The learner's kernel ``hit_stage(top_k_tokens, slot_tags, newest, hit_lane)``
runs as one block; ``check_hit_stage`` compares ``hit_lane`` with the reference's answer, names the
usual mistakes, and on a GPU times it against version 1's scan at sglang's sizes.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .. import device
from ..device import cuda
from ..hisparse.single_step import versions
from ..hisparse.single_step.launch import STATIC_SHARED_LIMIT
from .common import figure, show
from . import threadviz
from .ex00 import LearnerError, NotYet, learner_line, verdict
from .puzzles.harness import arena, out_of_bounds, stub_message

PERFORMANCE_MD = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
BENCH_COMMAND = "hisparse-numba bench swap-in --versions --markdown docs/performance.md"


# --- the rungs -------------------------------------------------------------------------------

def print_rungs() -> None:
    """Each rung: number, module, and the one line that says what it changes and why."""
    for number, v in sorted(versions.VERSIONS.items()):
        tuned = "  (the default)" if number == versions.DEFAULT else ""
        print(f"version {number}: single_step/{v.name}.py{tuned}\n    {v.why}")


def excerpt(source_of, start: str, stop: str) -> None:
    """Print the lines of ``source_of`` (a rung's number, or a module) from the first line that
    contains ``start`` up to the next line that contains ``stop``, with their line numbers."""
    module = versions.module(source_of) if isinstance(source_of, int) else source_of
    lines, first = inspect.getsourcelines(module)
    begin = next(i for i, line in enumerate(lines) if start in line)
    end = next(i for i in range(begin + 1, len(lines)) if stop in lines[i])
    while end > begin + 1 and not lines[end - 1].strip():
        end -= 1
    name = Path(inspect.getsourcefile(module)).name
    print(f"# {name}, lines {first + begin}-{first + end - 1}")
    for i in range(begin, end):
        print(f"{first + i:4d}  {lines[i].rstrip()}")


def same_as_reference(version: int, seed: int = 16) -> bool:
    """Run rung ``version`` and the reference on one small problem; compare every array."""
    from ..hisparse.single_step import load_cache_to_device_buffer_mla, load_cache_to_device_buffer_mla_reference
    from ..hisparse.single_step.examples import (ARRAY_KEYS, copy_problem, make_swap_in_problem,
                                                 to_device_problem, to_host_problem)

    p = make_swap_in_problem(np.random.default_rng(seed), batch=3, num_top_k=8, hot_buffer_size=16,
                             block_size=32, num_real=2, fast_rows=1, hit_fraction=0.5)
    want = copy_problem(p)
    load_cache_to_device_buffer_mla_reference(**want)
    d = to_device_problem(p)
    load_cache_to_device_buffer_mla(**d, version=version)
    got = to_host_problem(d)
    differs = [k for k in ARRAY_KEYS if want.get(k) is not None and not np.array_equal(got[k], want[k])]
    name = versions.VERSIONS[version].name
    print(f"version {version} ({name}): " + ("equals the reference on every output and state array"
                                             if not differs else f"DIFFERS on {', '.join(differs)}"))
    return not differs


def draw_shared_memory(num_top_k: int = 2048, block_size: int = 1024) -> None:
    """Static shared memory per block of each rung against H, with the 48 KiB limit."""
    hot = np.arange(num_top_k, 16385, 128)
    fig, (ax,) = figure(6, 3)
    for number, v in sorted(versions.VERSIONS.items()):
        need = [versions.module(number).shared_memory_bytes(num_top_k, int(h), block_size) / 1024 for h in hot]
        ax.plot(hot, need, label=f"version {number} ({v.name})")
    ax.axhline(STATIC_SHARED_LIMIT / 1024, color="#e8604c", ls="--", label="48 KiB static limit")
    ax.axvline(4096, color="grey", ls=":", label="sglang's H = 4096")
    ax.set_xlabel("hot_buffer_size H")
    ax.set_ylabel("KiB of shared memory per block")
    ax.set_title(f"K = {num_top_k}, block {block_size}", fontsize=9)
    ax.legend(fontsize=8)
    show(fig)


# --- the measured ladder -----------------------------------------------------------------------

def ladder_rows(path: Path = PERFORMANCE_MD) -> list[dict]:
    """Each rung's time per call: measured now on a GPU (the ladder benchmark, 5 calls per figure,
    in a process of its own), read from docs/performance.md in the simulator (and said so)."""
    from ..bench.ladder_table import BEGIN, END, read_markdown

    if not device.SIMULATOR:
        print("measuring on this GPU: the ladder benchmark (hisparse-numba bench swap-in --versions --iters 5)")
        with tempfile.TemporaryDirectory() as tmp:
            page = Path(tmp, "ladder.md")
            page.write_text(f"{BEGIN}\n{END}\n")
            subprocess.run([sys.executable, "-m", "hisparse_numba", "bench", "swap-in", "--versions",
                            "--iters", "5", "--markdown", str(page)], check=True)
            return read_markdown(page, "swap-in")[1]
    provenance, rows = read_markdown(path, "swap-in")
    if not rows:
        print(f"the simulator times nothing, and {path.name} has no ladder table here yet: on a GPU, "
              f"`{BENCH_COMMAND}` writes it")
        return []
    print(f"the simulator times nothing: these figures are READ from docs/performance.md. {provenance}")
    return rows


def draw_ladder(rows: list[dict]) -> None:
    """Microseconds per call of each rung, one group of bars per batch."""
    if not rows:
        return
    batches = sorted({r["batch"] for r in rows})
    rungs = list(dict.fromkeys(r["rung"] for r in rows))
    fig, (ax,) = figure(6, 3)
    width = 0.8 / len(rungs)
    for j, rung in enumerate(rungs):
        us = [next((r["us"] for r in rows if r["rung"] == rung and r["batch"] == b), np.nan) for b in batches]
        bars = ax.bar(np.arange(len(batches)) + j * width, us, width, label=f"version {rung}")
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(np.arange(len(batches)) + width * (len(rungs) - 1) / 2, [f"batch {b}" for b in batches])
    ax.set_ylabel("microseconds per call")
    ax.set_title("the ladder: K 2048, H 4096, 512-byte items, miss rate 0.2", fontsize=9)
    ax.legend(fontsize=8)
    show(fig)


# --- the exercise: the hit stage through a hash -------------------------------------------------

HASH_SIZE = 4096 if not device.SIMULATOR else 64      # 2 * the largest K the checker uses
STAGE_THREADS = 8 if device.SIMULATOR else 1024     # the block that times a stage on a GPU
CHECK_THREADS = 8       # the block that checks one, in both worlds: fewer threads than slots and lanes


@cuda.jit
def hit_stage_scanned(top_k_tokens, slot_tags, newest, hit_lane):
    """Version 1's hit stage: each thread takes hot slots and scans the K lanes for the slot's tag."""
    K = top_k_tokens.shape[0]
    H = slot_tags.shape[0]
    for p in range(cuda.threadIdx.x, H, cuda.blockDim.x):
        tag = slot_tags[p]
        lane = -1
        if tag >= 0 and tag != newest:
            for i in range(K):
                if top_k_tokens[i] == tag:
                    lane = i
                    break
        hit_lane[p] = lane


def hit_lanes_reference(top_k_tokens, slot_tags, newest) -> np.ndarray:
    """The reference's ``hit`` test, as the lane each hot slot serves (-1: no hit)."""
    t, tags = np.asarray(top_k_tokens), np.asarray(slot_tags)
    out = np.full(tags.shape, -1, np.int32)
    for p, tag in enumerate(tags.tolist()):
        if tag >= 0 and tag != newest and tag in t:
            out[p] = int(np.flatnonzero(t == tag)[0])
    return out


def stage_cases(rng=None):
    """``(top_k_tokens, slot_tags, newest)``: a hand case (the newest position resident and
    selected, empty slots) and a random one, K = 8 lanes and H = 16 slots (8 threads: each takes
    one lane and two slots)."""
    hand = (np.array([3, 40, 7, 12, 25, 30, 1, 33], np.int32),
            np.array([12, -1, 40, 5, 3, 18, 33, -1, 2, 7, 26, 0, 1, 29, 8, 41], np.int32), 40)
    rng = np.random.default_rng(16) if rng is None else rng
    t = rng.permutation(60)[:8].astype(np.int32)
    tags = np.concatenate([t[rng.permutation(8)[:5]], 60 + np.arange(9), [-1, -1]]).astype(np.int32)
    return [hand, (t, rng.permutation(tags).astype(np.int32), int(t[0]))]


def _source(kernel) -> str:
    try:
        return inspect.getsource(getattr(kernel, "py_func", kernel))
    except (OSError, TypeError):
        return ""


def _barrier_problem(src: str) -> str | None:
    """The barrier the hashed stage needs, where the learner's source lacks it."""
    def between(a: str, b: str) -> bool:
        i, j = src.find(a), src.find(b, max(src.find(a), 0))
        return i < 0 or j < 0 or "cuda.syncthreads()" in src[i:j]
    if not between("hash_insert_dev(", "hash_find_dev("):
        return ("no cuda.syncthreads() between the inserts and the lookups: a thread may look a slot up "
                "before another thread has inserted its lane, and miss a hit (a race the simulator may "
                "hide and a GPU will not)")
    if not between("block_fill_dev(", "hash_insert_dev("):
        return ("no cuda.syncthreads() between emptying the hash and the inserts: one thread's insert "
                "can be wiped by another thread still emptying that entry")
    return None


def _time_on_gpu(kernel) -> str:
    """On a GPU: the learner's stage against version 1's scan at sglang's K=2048, H=4096."""
    from ..bench import harness

    rng = np.random.default_rng(4)
    t = rng.permutation(8192)[:2048].astype(np.int32)
    tags = rng.permutation(np.concatenate([t[:1024], 8192 + np.arange(3072)])).astype(np.int32)
    d = [device.to_device(a) for a in (t, tags, np.zeros(4096, np.int32))]
    us = {name: 1e3 * harness.gpu_time_ms(lambda k=k: device.launch(k, 1, STAGE_THREADS, d[0], d[1], 8191, d[2]),
                                          iters=20)
          for name, k in (("scan", hit_stage_scanned), ("hash", kernel))}
    return (f"; on this GPU at K=2048, H=4096, block {STAGE_THREADS}: version 1's scan {us['scan']:.1f} us, "
            f"your hash {us['hash']:.1f} us ({us['scan'] / us['hash']:.1f}x)")


# --- running a learner's stage -----------------------------------------------------------------

def _launch_stage(kernel, args: dict):
    """``kernel[1, CHECK_THREADS](*args)`` in place: its trace in the simulator, None on a GPU. The
    learner's NotImplementedError or other exception becomes NotYet / LearnerError."""
    stub = None if device.SIMULATOR else stub_message(kernel)   # a GPU kernel cannot raise: read its source
    if stub:
        raise NotYet(stub)
    try:
        if device.SIMULATOR:
            names = [k for k, v in args.items() if isinstance(v, np.ndarray)]
            return threadviz.record(kernel, 1, CHECK_THREADS, *args.values(), names=names)
        dev = {k: device.to_device(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
        device.launch(kernel, 1, CHECK_THREADS, *dev.values())
        device.synchronize()
        for k, v in dev.items():
            if isinstance(args[k], np.ndarray):
                args[k][...] = device.to_host(v)
        return None
    except NotImplementedError as err:
        raise NotYet(str(err).split(": ", 1)[-1]) from None
    except Exception as err:  # noqa: BLE001 - an error inside the learner's kernel is theirs
        raise LearnerError(f"your kernel raised {type(err).__name__}: {err}{learner_line(kernel, err)}") from None


def _first_wrong(trace, got, want, describe):
    """(message about the first element of ``hit_lane`` that differs, the elements to outline)."""
    bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    if bad.size == 0:
        return None, []
    p = int(bad[0])
    writers = trace.writers("hit_lane").get(p, []) if trace is not None else []
    who = (f"your thread {' and '.join(sorted({a.who for a in writers}))} wrote" if writers
           else "no thread wrote" if trace is not None else "")
    more = f" ({bad.size} elements differ)" if bad.size > 1 else ""
    return (f"{who} {describe(p)}: {got.reshape(-1)[p]} where the reference has {want.reshape(-1)[p]}"
            f"{more}").strip(), [("hit_lane", int(i)) for i in bad[:64]]


def _draw_wrong(trace, highlight) -> None:
    if trace is not None:
        import matplotlib.pyplot as plt

        threadviz.draw(trace, ["slot_tags", "hit_lane"], highlight=highlight,
                       title="your stage's accesses (red outline: a wrong element)")
        plt.show()


@verdict
def check_hit_stage(kernel):
    """``kernel(top_k_tokens, slot_tags, newest, hit_lane)``, one block: ``hit_lane[p]`` = the lane
    that selected the position hot slot ``p`` holds, -1 when none did (or the slot is empty, or
    holds the newest position)."""
    src = _source(kernel)
    for top_k, tags, newest in stage_cases():
        want = hit_lanes_reference(top_k, tags, newest)
        args = dict(top_k_tokens=arena(top_k), slot_tags=arena(tags), newest=newest,
                    hit_lane=arena(np.full(tags.shape, -2, np.int32)))
        trace = _launch_stage(kernel, args)

        def describe(p, tags=tags):
            return f"hit_lane[{p}] (slot tag {tags[p]})"
        got = args["hit_lane"]
        msg, hl = _first_wrong(trace, got, want, describe)
        if msg and (got == -2).any():
            msg += ("; some slots were never looked up: each thread takes slots tid, tid + blockDim.x, ... "
                    "(there are more slots than threads)")
        elif msg and newest in tags and got[list(tags).index(newest)] >= 0:
            msg += ("; the slot holding the newest position (seq_len - 1) is not a hit: that lane reads "
                    "column H, so leave the newest position out of the hash")
        outside = out_of_bounds(trace)
        problems = [m for m in (outside[0] if outside else None, msg) if m]
        if problems:
            _draw_wrong(trace, hl)
            return False, "; ".join(problems)
    if "hash_find_dev(" not in src:
        return False, ("wrong: hit_lane is right, the way version 1 finds it: look each slot up in the hash "
                       "(hash_find_dev) instead of scanning the lanes")
    problem = _barrier_problem(src)
    if problem:
        return False, f"wrong: hit_lane is right this time, but there is {problem}"
    timing = "" if device.SIMULATOR else _time_on_gpu(kernel)
    return True, ("right: one insert per lane and one probe per slot, instead of K reads per slot"
                  + timing)


def warm_up() -> None:
    """Launch the package kernel this lesson launches (``warmup --lessons``)."""
    t, tags, newest = stage_cases()[0]
    d = [device.to_device(a) for a in (t, tags, np.zeros(tags.shape, np.int32))]
    device.launch(hit_stage_scanned, 1, STAGE_THREADS, d[0], d[1], newest, d[2])
    device.synchronize()


__all__ = ["check_hit_stage", "draw_ladder", "draw_shared_memory", "excerpt", "hit_stage_scanned",
           "ladder_rows", "print_rungs", "same_as_reference", "HASH_SIZE", "STAGE_THREADS"]
