"""``bench startup``'s first-run figures: what a learner on a cold GPU waits for.

* **rungs**: each kernel ladder's rung compiled cold, then loaded warm, in fresh processes (one
  lesson-sized configuration each: ``warmup.speculative`` / ``warmup.single_step`` on that rung),
  all rungs at once (each compile is one CPU core's work), so the figures compare the rungs.
* **flow**: ``hisparse-numba lessons run --solved --warmup`` (what ``make lessons`` runs) in a
  fresh process with an empty kernel cache: the seconds until the first lesson kernel has run (an
  IPython startup file in the lessons' kernels logs each kernel process's first
  ``device.launch``), and the whole flow, end to end.

``--markdown FILE`` writes the table, with GPU, date and command, between ``<!-- startup:begin
-->`` and ``<!-- startup:end -->`` in FILE (added at its end when FILE lacks them).
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BEGIN, END = "<!-- startup:begin -->", "<!-- startup:end -->"
LOG_ENV = "HISPARSE_NUMBA_FIRST_LAUNCH_LOG"

# Written into the lessons' kernels' IPython profile: logs the wall-clock time at which each kernel
# process's first launch returned, and what it launched.
STARTUP = f"""\
import os, time
from hisparse_numba import device as _device
_launch = _device.launch
def _first_launch(kernel, *args):
    _device.launch = _launch
    _launch(kernel, *args)
    with open(os.environ["{LOG_ENV}"], "a") as f:
        f.write(f"{{time.time()}} {{getattr(kernel, 'py_func', kernel).__qualname__}}\\n")
_device.launch = _first_launch
"""


def rung_jobs() -> list[tuple[str, dict]]:
    """(row name, ``warmup.<function>`` keywords) of one lesson-sized configuration per rung."""
    from ..hisparse.single_step import versions as ss
    from ..hisparse.speculative import versions as spec

    jobs = [(f"speculative v{n} {v.name}", {"function": "speculative", "batch": 2, "steps": 2,
                                            "top_k": 8, "hot": 16, "record": True, "version": n})
            for n, v in sorted(spec.VERSIONS.items())]
    jobs += [(f"single-step v{n} {v.name}", {"function": "single_step", "record_plan": True,
                                             "rungs": (n,)}) for n, v in sorted(ss.VERSIONS.items())]
    return jobs


def rung_child(spec: str) -> dict:
    """In a fresh process: run ``warmup.<function>(**keywords)`` (JSON ``spec``) twice."""
    from .. import device, warmup

    kwargs = json.loads(spec)
    fn = getattr(warmup, kwargs.pop("function"))
    if "rungs" in kwargs:
        kwargs["rungs"] = tuple(kwargs["rungs"])
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        fn(**kwargs)
        device.synchronize()
        times.append(time.perf_counter() - t0)
    return {"first_s": times[0], "again_s": times[1]}


def _child(spec: dict, cache_dir: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", __name__, json.dumps(spec)], env=env,
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{spec}: child failed\n{out.stderr[-3000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["process_s"] = time.perf_counter() - t0
    return row


def measure_rungs(out=None) -> list[dict]:
    """Cold then warm (own empty cache each) per rung, the rungs in parallel processes."""
    out = out or sys.stdout

    def one(name_spec):
        name, spec = name_spec
        with tempfile.TemporaryDirectory(prefix="hisparse-rung-") as cache:
            cold, warm = _child(spec, cache), _child(spec, cache)
        print(f"  {name}: cold {cold['first_s']:.1f} s, warm {warm['first_s']:.1f} s", file=out, flush=True)
        return {"what": name, "cold_s": cold["first_s"], "warm_s": warm["first_s"],
                "cold_process_s": cold["process_s"], "warm_process_s": warm["process_s"]}

    jobs = rung_jobs()
    with cf.ThreadPoolExecutor(min(len(jobs), os.cpu_count() or 1)) as pool:
        return list(pool.map(one, jobs))


def first_launches(log: Path) -> list[tuple[float, str]]:
    """(wall-clock time, kernel) of each lesson kernel's first launch, earliest first."""
    rows = []
    for line in log.read_text().splitlines() if log.exists() else []:
        when, _, kernel = line.partition(" ")
        rows.append((float(when), kernel))
    return sorted(rows)


def measure_flow(lessons=(), extra=(), out=None) -> dict:
    """The cold lessons flow in a fresh process; its output goes to ``out`` as it comes."""
    out = out or sys.stdout
    with tempfile.TemporaryDirectory(prefix="hisparse-flow-") as tmp:
        startup = Path(tmp, "ipython", "profile_default", "startup")
        startup.mkdir(parents=True)
        (startup / "00-first-launch.py").write_text(STARTUP)
        log = Path(tmp, "first-launch.txt")
        root = str(Path(__file__).resolve().parents[2])     # this hisparse_numba, in every process
        env = dict(os.environ, NUMBA_CACHE_DIR=str(Path(tmp, "kernels")), IPYTHONDIR=str(Path(tmp, "ipython")),
                   PYTHONPATH=os.pathsep.join([root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
                   **{LOG_ENV: str(log)})
        command = [sys.executable, "-m", "hisparse_numba", "lessons", "run", *lessons, "--solved",
                   "--warmup", "--out", str(Path(tmp, "lessons")), *extra]
        t0, wall0 = time.perf_counter(), time.time()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            print(f"    {line.rstrip()}", file=out, flush=True)
        rc = proc.wait()
        total = time.perf_counter() - t0
        launches = first_launches(log)
    first = launches[0] if launches else (float("nan"), "-")
    return {"what": "cold lessons flow", "first_kernel_s": first[0] - wall0, "first_kernel": first[1],
            "total_s": total, "rc": rc}


def markdown_block(rungs: list[dict], flow: dict | None, gpu: str, date: str | None = None,
                   command: str | None = None) -> str:
    """The startup section: provenance line, the flow's two figures, the rungs' table."""
    date = datetime.date.today().isoformat() if date is None else date
    command = "hisparse-numba " + shlex.join(sys.argv[1:]) if command is None else command
    lines = [BEGIN, f"Measured on {gpu} on {date} with `{command}` (generated by that command: rerun "
             "it rather than edit). Cold: an empty kernel cache, a fresh process; warm: the same cache "
             "again, a fresh process.", ""]
    if flow is not None:
        lines += ["| cold `make lessons` flow (warmup in the background + solved lessons) | seconds |",
                  "|---|---|",
                  f"| until the first lesson kernel has run ({flow['first_kernel']}) | {flow['first_kernel_s']:.1f} |",
                  f"| every lesson done{'' if flow['rc'] == 0 else ' (a lesson FAILED)'} | {flow['total_s']:.1f} |", ""]
    if rungs:
        lines += ["| rung, one lesson-sized configuration | cold compile s | warm load s |", "|---|---|---|"]
        lines += [f"| {r['what']} | {r['cold_s']:.1f} | {r['warm_s']:.2f} |" for r in rungs]
    return "\n".join(lines + [END])


def write_markdown(path: Path, block: str) -> None:
    """Replace FILE's startup section by ``block`` (appended when FILE has no markers; FILE is
    created when missing)."""
    text = path.read_text() if path.exists() else "# Performance\n"
    if BEGIN in text and END in text and text.index(BEGIN) < text.index(END):
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Startup: a cold GPU\n\n" + block + "\n"
    path.write_text(text)


if __name__ == "__main__":      # one rung's cold and warm compile, in a process of its own (_child)
    print(json.dumps(rung_child(sys.argv[1])), flush=True)
