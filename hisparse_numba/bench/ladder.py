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

import importlib
import sys
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from .. import device
from .ladder_table import BEGIN, COLUMNS, END, markdown_block, read_markdown, write_markdown  # noqa: F401

LADDER_BATCHES = (1, 8, 64)
REPEATS = 3                                     # timings per rung and batch; the fastest is kept
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
    parser.add_argument("--repeats", type=int, default=REPEATS,
                        help=f"with --versions: time each rung and batch this many times, keep the "
                             f"fastest (default {REPEATS})")
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


CHECK_MAX_BATCH = 8


def measure(family: Family, batches=LADDER_BATCHES, iters: int = 20, floor_gbps: float | None = None,
            out=None, repeats: int = REPEATS) -> list[dict]:
    """The ladder's rows: each rung checked on the benchmark's inputs (at the batches up to
    ``CHECK_MAX_BATCH``: the NumPy reference of a speculative call at batch 64 takes about 40 s,
    and a larger batch launches the same compiled kernels), then timed per batch: the fastest of
    ``repeats`` timings of ``iters`` calls. (The copy-bound batch 64 runs at the host link's pace,
    which other GPUs of a shared host can slow for a moment: about one timing in three there came
    out 25-90% slower on a lent H100.)"""
    out = sys.stdout if out is None else out
    from . import harness

    versions = registry(family)
    floor = harness.h2d_pinned_gbps() if floor_gbps is None else floor_gbps
    print(f"pinned host->device memcpy: {floor:.1f} GB/s (the floor for miss copies)", file=out, flush=True)
    rows, previous = [], {}
    for number, v in sorted(versions.VERSIONS.items()):
        for batch in batches:
            bench = family.bench(batch, iters)
            differs = bench.check(number) if batch <= CHECK_MAX_BATCH else []
            if differs:
                print(f"rung {number} ({v.name}), batch {batch}: NOT TIMED, differs from the reference "
                      f"on the benchmark's inputs: {', '.join(differs)}", file=out, flush=True)
                continue
            us = min(bench.time_us(number, graph=(batch == 1), iters=iters) for _ in range(repeats))
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
    rows = measure(family, iters=args.iters, repeats=args.repeats)
    harness.print_table(rows, COLUMNS)
    if args.markdown:
        write_markdown(Path(args.markdown), family, markdown_block(family, rows))
        print(f"rewrote the {family.name} ladder in {args.markdown}")
    return 0
