"""The kernel ladder: ``bench swap-in --versions`` and ``bench spec --versions``.

A family's rungs are listed by its registry (``hisparse/single_step/versions.py``,
``hisparse/speculative/versions.py``: ``VERSIONS``, ``DEFAULT``, ``check_version``, ``module``).
Each rung is first run once on the benchmark's own inputs and compared with the NumPy reference on
every output and state array; a rung that differs is not timed, and one line names the arrays.
Then it is timed at batch 1, 8 and 64 on arguments checked once: at batch 1 as CUDA-graph replay
(how sglang's decode loop launches it, so the host's launch cost stays out), at the larger batches
with CUDA events around back-to-back launches queued behind the harness's hold kernel. Each rung
and batch gets fresh arrays, so a wrong rung cannot spoil the next one's inputs.

Printed per rung and batch: microseconds per call, the miss bytes' rate in GB/s, that rate as a
share of the pinned host-to-device memcpy measured in the same run (the floor for miss copies),
and the speed-up over the previous rung at the same batch.

``--check-only`` runs the equality check of every rung at small sizes and times nothing: it works
in the simulator too. ``--markdown FILE`` rewrites this family's block inside the section between
``<!-- ladder:begin -->`` and ``<!-- ladder:end -->`` of FILE (docs/performance.md) with the table,
the GPU's name, the date and the exact command: generated, never typed. Lesson 16 reads it back
(:func:`read_markdown`) where no GPU is at hand.
"""

from __future__ import annotations

import datetime
import importlib
import re
import shlex
import sys
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from .. import device

LADDER_BATCHES = (1, 8, 64)
BEGIN, END = "<!-- ladder:begin -->", "<!-- ladder:end -->"
COLUMNS = ("rung", "batch", "timing", "us", "GBps", "of_floor", "speedup")
HEADERS = ("rung", "batch", "timing", "us per call", "GB/s", "of memcpy floor", "over previous rung")


class Family(NamedTuple):
    name: str                                   # the bench command: swap-in, spec
    title: str
    registry: str                               # the registry module
    small_check: Callable[[int], list]          # version -> what differs from the reference
    bench: Callable[[int, int], object]         # (batch, iters) -> a LadderBench


def add_arguments(parser) -> None:
    parser.add_argument("--versions", action="store_true",
                        help="time every rung of the kernel ladder (checked against the reference "
                             "first) at batch 1, 8 and 64")
    parser.add_argument("--check-only", action="store_true",
                        help="check every rung against the reference at small sizes, time nothing "
                             "(runs in the simulator too)")
    parser.add_argument("--markdown", metavar="FILE",
                        help=f"with --versions: rewrite the ladder section ({BEGIN} ... {END}) of FILE")


def requested(args) -> bool:
    """Whether a bench command's arguments ask for the ladder (``--markdown`` needs ``--versions``)."""
    if args.markdown and not args.versions:
        raise SystemExit("--markdown FILE writes the ladder's table: add --versions")
    return bool(args.versions or args.check_only)


def registry(family: Family):
    return importlib.import_module(family.registry)


def check_rungs(family: Family, out=None) -> int:
    """Every rung against the reference at small sizes: 0 when all agree, 1 otherwise."""
    out = sys.stdout if out is None else out
    versions = registry(family)
    failed = 0
    for number, v in sorted(versions.VERSIONS.items()):
        differs = family.small_check(number)
        verdict = "equals the reference" if not differs else f"DIFFERS from the reference: {', '.join(differs)}"
        print(f"{family.name} rung {number} ({v.name}): {verdict}", file=out, flush=True)
        failed += bool(differs)
    return 1 if failed else 0


def measure(family: Family, batches=LADDER_BATCHES, iters: int = 20, floor_gbps: float | None = None,
            out=None) -> list[dict]:
    """The ladder's rows: each rung checked on the benchmark's inputs, then timed per batch."""
    out = sys.stdout if out is None else out
    from . import harness

    versions = registry(family)
    floor = harness.h2d_pinned_gbps() if floor_gbps is None else floor_gbps
    print(f"pinned host->device memcpy: {floor:.1f} GB/s (the floor for miss copies)", file=out, flush=True)
    rows, previous = [], {}
    for number, v in sorted(versions.VERSIONS.items()):
        for batch in batches:
            bench = family.bench(batch, iters)
            differs = bench.check(number)
            if differs:
                print(f"rung {number} ({v.name}), batch {batch}: NOT TIMED, differs from the reference "
                      f"on the benchmark's inputs: {', '.join(differs)}", file=out, flush=True)
                continue
            us = bench.time_us(number, graph=(batch == 1), iters=iters)
            gbps = bench.miss_bytes / (us * 1e-6) / 1e9
            rows.append(dict(rung=f"{number} {v.name}", batch=batch, timing="graph" if batch == 1 else "events",
                             us=us, GBps=gbps, of_floor=f"{gbps / floor:.0%}",
                             speedup=f"{previous[batch] / us:.2f}x" if batch in previous else "-"))
            previous[batch] = us
            print(f"  rung {number} batch {batch}: {us:.1f} us", file=out, flush=True)
            del bench                       # free the batch's buffers before the next one
            if device.backend() == "cuda":
                device.xp.get_default_memory_pool().free_all_blocks()
    return rows


def run(family: Family, args) -> int:
    """``bench <family> --versions`` / ``--check-only``."""
    if args.check_only:
        return check_rungs(family)
    from . import harness

    harness.require_gpu(family.name)
    rows = measure(family, iters=args.iters)
    harness.print_table(rows, COLUMNS)
    if args.markdown:
        write_markdown(Path(args.markdown), family, markdown_block(family, rows))
        print(f"rewrote the {family.name} ladder in {args.markdown}")
    return 0


# ------------------------------------------------------------------------------ markdown

def gpu_name() -> str:
    name = device.cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def markdown_block(family: Family, rows: list[dict], *, gpu: str | None = None, date: str | None = None,
                   command: str | None = None) -> str:
    """The family's block: heading, provenance line and table."""
    gpu = gpu_name() if gpu is None else gpu
    date = datetime.date.today().isoformat() if date is None else date
    command = "hisparse-numba " + shlex.join(sys.argv[1:]) if command is None else command
    lines = [f"<!-- ladder:{family.name}:begin -->", f"### {family.title}", "",
             f"Measured on {gpu} on {date} with `{command}` (generated by that command: "
             "rerun it rather than edit). Batch 1: CUDA-graph replay; 8 and 64: CUDA events.", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for r in rows:
        cells = [r[c] if isinstance(r[c], str) else f"{r[c]:.1f}" if isinstance(r[c], float) else str(r[c])
                 for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(f"<!-- ladder:{family.name}:end -->")
    return "\n".join(lines)


def write_markdown(path: Path, family: Family, block: str) -> None:
    """Replace the family's block inside FILE's ladder section (appended there if absent)."""
    text = path.read_text()
    if BEGIN not in text or END not in text or text.index(BEGIN) > text.index(END):
        raise SystemExit(f"{path} has no ladder section: add the lines {BEGIN} and {END} where the "
                         "tables belong, then run this again")
    head, rest = text.split(BEGIN, 1)
    section, tail = rest.split(END, 1)
    own = re.compile(rf"<!-- ladder:{re.escape(family.name)}:begin -->.*?<!-- ladder:{re.escape(family.name)}:end -->",
                     re.S)
    if own.search(section):
        section = own.sub(lambda _: block, section)
    else:
        section = section.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(head + BEGIN + section.rstrip("\n") + "\n" + END + tail)


def read_markdown(path: Path, family_name: str) -> tuple[str, list[dict]]:
    """The provenance line and the rows of a family's block in FILE (``("", [])`` if absent)."""
    text = Path(path).read_text() if Path(path).exists() else ""
    m = re.search(rf"<!-- ladder:{re.escape(family_name)}:begin -->(.*?)<!-- ladder:{re.escape(family_name)}:end -->",
                  text, re.S)
    if not m:
        return "", []
    provenance = next((ln for ln in m[1].splitlines() if ln.startswith("Measured on")), "")
    rows = []
    for ln in m[1].splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if len(cells) == len(COLUMNS) and cells[0][:1].isdigit():
            row = dict(zip(COLUMNS, cells))
            row["batch"], row["us"] = int(row["batch"]), float(row["us"])
            rows.append(row)
    return provenance, rows


# ------------------------------------------------------------------------------ the families

def _swap_in_small_check(version: int) -> list:
    from ..hisparse.single_step import load_cache_to_device_buffer_mla, load_cache_to_device_buffer_mla_reference
    from ..hisparse.single_step.examples import (ARRAY_KEYS, make_swap_in_problem, new_queries,
                                                 to_device_problem, to_host_problem)

    rng = np.random.default_rng(16)
    p = make_swap_in_problem(rng, batch=3, num_top_k=8, hot_buffer_size=16, block_size=32, num_real=2,
                             fast_rows=1, hit_fraction=0.5)
    differs = []
    for step in range(2):
        if step:
            new_queries(rng, p, hit_fraction=0.5, grow=True)
        d = to_device_problem(p)
        load_cache_to_device_buffer_mla(**d, version=version)
        load_cache_to_device_buffer_mla_reference(**p)
        got = to_host_problem(d)
        differs += [f"{k} (call {step + 1})" for k in ARRAY_KEYS
                    if p.get(k) is not None and not np.array_equal(got[k], p[k])]
        p = got
    return differs


class SwapInBench:
    """The single-step swap-in at ``bench swap-in``'s shape (``swap_in.Workload``)."""

    def __init__(self, batch: int, iters: int):
        from .swap_in import Workload

        self.w = Workload(batch, 2048, 4096, 512, 0.2, 1024)
        self.miss_bytes = batch * self.w.misses * 512

    def check(self, version: int) -> list:
        from ..hisparse.single_step import load_cache_to_device_buffer_mla, load_cache_to_device_buffer_mla_reference
        from ..hisparse.single_step.examples import ARRAY_KEYS, to_host_problem

        w, xp = self.w, device.xp
        plan = dict(miss_src=xp.zeros((w.batch, w.K), xp.int64), miss_dst=xp.zeros((w.batch, w.K), xp.int32),
                    miss_count=xp.zeros(w.batch, xp.int32))
        d = w.kwargs(w.queries[w.step % w.windows], **plan)
        w.step += 1
        want = to_host_problem(d)
        load_cache_to_device_buffer_mla_reference(**want)
        load_cache_to_device_buffer_mla(**d, version=version)
        got = to_host_problem(d)
        return [k for k in ARRAY_KEYS if want.get(k) is not None and not np.array_equal(got[k], want[k])]

    def time_us(self, version: int, graph: bool, iters: int) -> float:
        from ..hisparse import single_step as si
        from . import harness

        w = self.w
        w.version = version
        if not graph:
            return harness.gpu_time_ms(w.launch, iters=iters) * 1e3
        order = [(w.step + i) % w.windows for i in range(w.windows)]   # each window in turn

        def windows():
            for i in order:
                si.launch_unchecked(w.calls[i], w.prepared[i], version=version)
        replay = device.capture_graph(windows).replay
        return harness.gpu_time_ms(replay, iters=iters) * 1e3 / len(order)


def _spec_small_check(version: int) -> list:
    from ..hisparse.speculative import load_cache_to_device_buffer_spec_mla_reference
    from ..hisparse.speculative.examples import host_copy, make_spec_problem, mismatches, set_selection, snapshot
    from ..hisparse.speculative.launch import load_cache_to_device_buffer_spec_mla

    kw = make_spec_problem(batch=2, steps=2, top_k=8, hot=16, tail=4, item_words=2, record=True,
                           max_positions=256)
    tokens = np.arange(2 * 2 * 8, dtype=np.int32).reshape(2, 2, 8) * 5
    differs = []
    for call, shift in enumerate((0, 23)):          # the second call hits some of the first's
        set_selection(kw, (tokens + shift) % 200, np.full(4, 200))
        ref = host_copy(kw)
        load_cache_to_device_buffer_spec_mla(**kw, version=version)
        load_cache_to_device_buffer_spec_mla_reference(**ref)
        device.synchronize()
        differs += [f"{k} (call {call + 1})" for k in mismatches(snapshot(kw), snapshot(ref))]
    return differs


class SpecBench:
    """The speculative swap-in at ``bench spec``'s configuration (one index layer)."""

    def __init__(self, batch: int, iters: int):
        from ..hisparse.speculative.examples import make_spec_problem, set_selection
        from . import spec as s

        self.s, self.calls = s, iters + 8
        self.sel = device.xp.asarray(s.selections(batch, self.calls))
        positions = s.HOT + self.calls * s.MISS_ADVANCE + 4 * s.MISS_PER_STEP + 16
        self.kw = make_spec_problem(batch=batch, steps=s.NUM_STEPS, top_k=s.TOP_K, hot=s.HOT, tail=s.PAGE,
                                    item_words=s.ITEM_WORDS, scratch_capacity=s.SCRATCH,
                                    max_positions=positions, record=True)
        set_selection(self.kw, device.to_host(self.sel[0]), np.full(batch * s.NUM_STEPS, positions))
        self.miss_bytes = batch * s.UNIQUE_MISSES * 8 * s.ITEM_WORDS
        self.next = 1

    def check(self, version: int) -> list:
        from ..hisparse.speculative import load_cache_to_device_buffer_spec_mla_reference
        from ..hisparse.speculative.examples import host_copy, mismatches, snapshot
        from ..hisparse.speculative.launch import load_cache_to_device_buffer_spec_mla

        ref = host_copy(self.kw)
        load_cache_to_device_buffer_spec_mla(**self.kw, version=version)
        load_cache_to_device_buffer_spec_mla_reference(**ref)
        device.synchronize()
        return mismatches(snapshot(self.kw), snapshot(ref))

    def time_us(self, version: int, graph: bool, iters: int) -> float:
        from ..hisparse.speculative import check_speculative
        from ..hisparse.speculative.launch import launch_unchecked
        from .harness import gpu_time_ms
        from .startup import spec_call

        if graph:
            return self.s._graph_call_us(self.kw, self.sel, self.calls, version=version)
        call = check_speculative(**spec_call(self.kw))

        def next_selection():
            self.next = (self.next + 1) % self.calls
            self.kw["top_k_tokens"][...] = self.sel[self.next]

        def one_call():
            next_selection()
            launch_unchecked(call, version=version)
        return (gpu_time_ms(one_call, iters=iters) - gpu_time_ms(next_selection, iters=iters)) * 1e3


SWAP_IN = Family("swap-in", "Single-step swap-in, rung by rung (K 2048, H 4096, 512-byte items, miss rate 0.2)",
                 "hisparse_numba.hisparse.single_step.versions", _swap_in_small_check, SwapInBench)
SPEC = Family("spec", "Speculative swap-in, rung by rung (4 x 2048 occurrences, H 4096, 576-byte items, "
              "782 unique misses per request)", "hisparse_numba.hisparse.speculative.versions",
              _spec_small_check, SpecBench)
