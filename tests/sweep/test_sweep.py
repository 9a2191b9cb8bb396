"""The mutation sweep over every public entry point (tests/sweep/harness.py says how calls are judged)."""

import pytest

from ..conftest import BIG
from . import kv_canary, single_step, speculative
from .harness import format_findings, sweep

ENTRY_POINTS = [*single_step.ENTRY_POINTS, *speculative.ENTRY_POINTS, *kv_canary.ENTRY_POINTS]
# the sweeps that are slow at sglang's sizes, with about how long they take on the H200
SECONDS_AT_SGLANG_SIZES = {"load_cache_to_device_buffer_spec_mla": 60, "load_cache_to_device_buffer_mla": 20}


def _param(entry):
    seconds = SECONDS_AT_SGLANG_SIZES.get(entry.name)
    marks = [pytest.mark.slow(seconds=seconds)] if BIG and seconds else []
    return pytest.param(entry, id=entry.name, marks=marks)


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRY_POINTS])
def test_mutated_calls_are_rejected_cleanly_or_equal_the_reference(entry):
    report = sweep(entry)
    print(report.summary())
    assert not report.findings, format_findings([report])


if __name__ == "__main__":   # python -m tests.sweep.test_sweep: every finding, for the people fixing them
    import sys
    reports = [sweep(e) for e in ENTRY_POINTS if len(sys.argv) < 2 or e.name in sys.argv[1:]]
    print(format_findings(reports, limit=10_000))
    print("total mutated calls:", sum(r.calls for r in reports))
