"""The mutation sweep over every public entry point (tests/sweep/harness.py says how calls are judged).

The default run judges a seeded sample of each entry point's mutations (``EntryPoint.budget``);
``HISPARSE_NUMBA_SWEEP=full`` judges all of them. ``python -m tests.sweep.test_sweep [--full]
[NAME ...]`` prints every finding and each entry point's time.
"""

import time

import pytest

from ..conftest import BIG
from . import kv_canary, single_step, speculative
from .harness import format_findings, full_sweep, sweep

ENTRY_POINTS = [*single_step.ENTRY_POINTS, *speculative.ENTRY_POINTS, *kv_canary.ENTRY_POINTS]
# the sweeps that are slow at sglang's sizes, with about how long they take on the H200
SECONDS_AT_SGLANG_SIZES = {"load_cache_to_device_buffer_spec_mla": 60, "load_cache_to_device_buffer_mla": 20}
# the default (sampled) run's slow ones in the simulator, on two busy cores (about 3 min in all)
SECONDS_IN_SIMULATOR = {"load_cache_to_device_buffer_mla": 40, "launch_canary_plan_kernels": 35,
                        "load_cache_to_device_buffer_spec_mla": 35, "copy_cache_planned_mla": 20,
                        "launch_canary_write_kernel": 15, "gather_to_hot_buffer": 13,
                        "initialize_hisparse_spec_state": 12}


def _param(entry):
    seconds = (SECONDS_AT_SGLANG_SIZES if BIG else SECONDS_IN_SIMULATOR).get(entry.name)
    marks = [pytest.mark.slow(seconds=seconds)] if seconds else []
    return pytest.param(entry, id=entry.name, marks=marks)


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRY_POINTS])
def test_mutated_calls_are_rejected_cleanly_or_equal_the_reference(entry):
    report = sweep(entry)
    print(report.summary())
    assert not report.findings, format_findings([report])


if __name__ == "__main__":   # every finding, for the people fixing them
    import sys
    args = sys.argv[1:]
    full = "--full" in args or full_sweep()
    names = [a for a in args if not a.startswith("--")]
    reports = []
    for e in ENTRY_POINTS:
        if names and e.name not in names:
            continue
        start = time.perf_counter()
        reports.append(sweep(e, full=full))
        print(f"{reports[-1].summary()} in {time.perf_counter() - start:.1f} s", flush=True)
    print(format_findings(reports, limit=10_000))
    print("total mutated calls:", sum(r.calls for r in reports))
