"""``hisparse-numba parity``: run every parity case, print Markdown tables, exit 0 when all match.

Exit codes: 0 every check passed, 1 some check failed or a case could not run, 2 sglang's kernels
are not usable here (the reason is printed).
"""

from __future__ import annotations

import sys
import time
import traceback

from .cases import (CaseResult, Sizes, canary_pipeline_case, canary_plan_case, handoff_case,
                    single_step_case, single_step_problem, spec_case, spec_problem, spec_selection,
                    time_pair)

NOT_COMPARED = [
    ("speculative: which miss lands in which hot slot, miss_src/miss_dst order, hot-slot order of "
     "device_buffer_tokens/locs, per-slot reference epochs, hash bank layout",
     "sglang numbers a request's unique misses with an atomic counter; these follow that order, "
     "so they are compared as sets per request plus each side's own consistency"),
    ("speculative, union mode: which slots the fallback takes, inside the resident-token and "
     "scratch-location sets",
     "compared once, as their own check (union-mode victims found by the fallback), next to the "
     "victims chosen by sampling, which are compared exactly"),
    ("speculative: any slot-level check that also differs between sglang's own two runs",
     "set aside and listed: sglang does not determine it (approximate-mode admission and "
     "direct-overflow victims follow the raced miss numbering)"),
    ("kv-canary: order of violation_ring rows",
     "both append with an atomic counter; rows are compared as a multiset"),
    ("single-step and speculative skip_io / copy_cache_planned_mla replay",
     "not part of this run: the replay copies exactly the recorded plan, compared above"),
]


def add_arguments(parser) -> None:
    parser.add_argument("--small", action="store_true",
                        help="simulator-sized problems instead of sglang's benchmark shape")
    parser.add_argument("--seed", type=int, default=20261130, help="seed of the random inputs")
    parser.add_argument("--plan-problems", type=int, default=24, help="random kv-canary plan problems")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per side")
    parser.add_argument("--no-timing", action="store_true", help="compare only; do not time both sides")
    parser.add_argument("--out", help="also write the Markdown report to this file")
    parser.add_argument("--cases", default=",".join(CASE_GROUPS),
                        help=f"comma-separated groups among {', '.join(CASE_GROUPS)} (default: all)")


CASE_GROUPS = ("single", "spec", "handoff", "canary", "timing")


def run_cases(ours, theirs, sizes: Sizes, seed: int, plan_problems: int, groups=CASE_GROUPS) -> list:
    """The cases of the chosen groups; a case that raises becomes a result carrying the error."""
    jobs = []
    if "single" in groups:
        jobs.append(("single-step swap-in", lambda: single_step_case(ours, theirs, sizes, seed)))
    if "spec" in groups:
        for i, regime in enumerate(sizes.regimes):
            jobs.append((f"speculative, {regime}",
                         lambda r=regime, i=i: spec_case(ours, theirs, sizes, r, seed + 10 * i)))
    if "handoff" in groups:
        jobs.append(("speculative state handover", lambda: handoff_case(ours, theirs, sizes, seed)))
    if "canary" in groups:
        jobs += [("kv-canary plan", lambda: canary_plan_case(ours, theirs, seed, plan_problems)),
                 ("kv-canary write + verify", lambda: canary_pipeline_case(ours, theirs, seed))]
    results = []
    for name, job in jobs:
        t0 = time.perf_counter()
        try:
            results.append(job())
        except Exception as e:  # noqa: BLE001 - reported, the other cases still run
            tb = traceback.format_exc()
            where = [ln.strip() for ln in tb.splitlines() if ln.strip().startswith("File ")][-1:]
            results.append(CaseResult(name, "-", error=f"{type(e).__name__}: {e} ({' '.join(where)})"))
            print(tb, file=sys.stderr)
        r = results[-1]
        print(f"[parity] {name}: {'ok' if r.ok else 'NOT OK'} ({time.perf_counter() - t0:.1f} s)"
              + "".join(f"\n    {c.name}: {c.detail}" for c in r.checks if not c.ok), file=sys.stderr,
              flush=True)
    return results


def timings(ours, theirs, sizes: Sizes, seed: int, iters: int) -> list:
    """(operation, ours ms, sglang ms, ours host ms, sglang host ms) rows."""
    import numpy as np
    rows = []

    from ..hisparse.speculative.examples import set_selection
    for regime in list(sizes.regimes)[:3]:
        misses, resident, cap = sizes.regimes[regime]
        kw = spec_problem(sizes, cap, seed)
        set_selection(kw, spec_selection(np.random.default_rng(seed), sizes, misses, resident),
                      np.full(sizes.batch * sizes.steps, sizes.positions))
        t = time_pair(ours, theirs, "spec", kw, iters)
        rows.append((f"speculative, {regime}", t[ours.name], t[theirs.name]))
    p = single_step_problem(sizes, seed)
    t = time_pair(ours, theirs, "swap_in", p, iters)
    rows.append(("single-step swap-in", t[ours.name], t[theirs.name]))
    return rows


def report(results: list, timing_rows: list, header: str) -> str:
    lines = [header, "", "| case | compared | result | notes |", "| --- | --- | --- | --- |"]
    for r in results:
        counted = [c for c in r.checks if not c.excluded]
        passed = sum(c.ok for c in counted)
        aside = len(r.checks) - len(counted)
        aside = f"; {aside} set aside" if aside else ""
        verdict = f"could not run: {r.error}" if r.error else (
            f"equal ({passed}/{len(counted)} checks{aside})" if r.ok else
            f"DIFFERENT ({len(counted) - passed} of {len(counted)} checks fail{aside})")
        lines.append(f"| {r.name} | {r.mode} | {verdict} | {'; '.join(r.notes)} |")
    failing = [(r, c) for r in results for c in r.checks if not c.ok]
    if failing:
        lines += ["", "Failing checks:", "", "| case | check | detail |", "| --- | --- | --- |"]
        lines += [f"| {r.name} | {c.name} | {c.detail} |" for r, c in failing]
    excluded = [(r, c) for r in results for c in r.checks if c.excluded]
    if excluded:
        lines += ["", "Set aside: checks that also fail between sglang's own two runs on the same input "
                  "(there sglang is not deterministic, so a difference says nothing about ours):", "",
                  "| case | check | sglang run 1 vs run 2 |", "| --- | --- | --- |"]
        lines += [f"| {r.name} | {c.name} | {c.excluded.split(': ', 1)[-1]} |" for r, c in excluded]
    handoff = [(r, c) for r in results for c in r.checks if "->" in c.name]
    if handoff:
        lines += ["", "| state handed over | count |", "| --- | --- |"]
        lines += [f"| {c.name} | {c.detail} |" for _, c in handoff]
    if timing_rows:
        lines += ["", "Timing: CUDA events around back-to-back (restore inputs + call) pairs minus the "
                  "restores alone; host = wall time of one synchronised call (median of 5).", "",
                  "| operation | ours GPU ms | sglang GPU ms | ours / sglang | ours host ms | sglang host ms |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for name, (og, oh), (sg, sh) in timing_rows:
            ratio = f"{og / sg:.2f}" if sg > 0 else "-"
            lines.append(f"| {name} | {og:.4f} | {sg:.4f} | {ratio} | {oh:.3f} | {sh:.3f} |")
    lines += ["", "Not compared exactly, and why:", ""]
    lines += [f"- {what}: {why}" for what, why in NOT_COMPARED]
    return "\n".join(lines) + "\n"


def run(args, theirs=None) -> int:
    """Run the parity check; ``theirs`` replaces sglang's side (tests pass a stand-in)."""
    from .. import device
    from .sides import OursSide, SglangSide, sglang_unavailable_reason
    if theirs is None:
        reason = sglang_unavailable_reason()
        if reason:
            print(f"hisparse-numba parity: sglang's kernels are not usable here: {reason}")
            return 2
        theirs = SglangSide()
    ours = OursSide()
    sizes = Sizes.small() if args.small else Sizes.gpu()
    groups = [g.strip() for g in args.cases.split(",") if g.strip()]
    unknown = sorted(set(groups) - set(CASE_GROUPS))
    if unknown:
        print(f"hisparse-numba parity: unknown --cases {', '.join(unknown)} (choose among {', '.join(CASE_GROUPS)})")
        return 2
    results = run_cases(ours, theirs, sizes, args.seed, args.plan_problems, groups)
    timing_rows = []
    if "timing" in groups and not args.no_timing and device.backend() == "cuda":
        try:
            timing_rows = timings(ours, theirs, sizes, args.seed, args.iters)
        except Exception as e:  # noqa: BLE001
            results.append(CaseResult("timing", "-", error=f"{type(e).__name__}: {e}"))
    version = getattr(theirs, "version", "?")
    text = report(results, timing_rows, f"Parity: hisparse-numba vs {theirs.name} {version} "
                                        f"(backend {device.backend()}, {'small' if args.small else 'benchmark'} sizes)")
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if all(r.ok for r in results) else 1
