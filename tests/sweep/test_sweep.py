"""The mutation sweep over every public entry point (tests/sweep/harness.py says how calls are judged)."""

import pytest

from . import kv_canary, single_step, speculative
from .harness import format_findings, sweep

ENTRY_POINTS = [*single_step.ENTRY_POINTS, *speculative.ENTRY_POINTS, *kv_canary.ENTRY_POINTS]


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=[e.name for e in ENTRY_POINTS])
def test_mutated_calls_are_rejected_cleanly_or_equal_the_reference(entry):
    report = sweep(entry)
    print(report.summary())
    assert not report.findings, format_findings([report])


if __name__ == "__main__":   # python -m tests.sweep.test_sweep: every finding, for the people fixing them
    import sys
    reports = [sweep(e) for e in ENTRY_POINTS if len(sys.argv) < 2 or e.name in sys.argv[1:]]
    print(format_findings(reports, limit=10_000))
    print("total mutated calls:", sum(r.calls for r in reports))
