"""Helpers and checker for lesson 12 (kv-canary: SWA without LUT, write capacity, verify overflow)."""

from __future__ import annotations

import warnings

from .. import device
from ..kv_canary import FailReason
from ..kv_canary.examples import PlanProblem, run_plan


def violations(ctx, start: int = 0) -> list[tuple[int, int, int, str]]:
    """``(slot, stored position, stored token, reasons)`` of the ring rows ``[start, index)``."""
    device.synchronize()
    index = int(device.to_host(ctx.violation_write_index)[0])
    ring = device.to_host(ctx.violation_ring)
    rows = ring[start:min(index, ring.shape[0])]
    out = []
    for row in sorted(rows.tolist(), key=lambda r: r[1]):
        reasons = "+".join(f.name for f in FailReason if int(row[7]) & int(f))
        out.append((int(row[1]), int(row[2]), int(row[3]), reasons))
    return out


class VerifySkippedWarning(UserWarning):
    """A verify launch that checked nothing because its plan overflowed."""


def warn_if_verify_skipped(plan, verify_capacity: int) -> bool:
    """Read ``plan.enable`` back and warn when the plan kernel disabled verification.

    sglang's runtime does the same on the host (a logged warning, some steps later): the kernels
    themselves never raise. Returns True when the step was skipped.
    """
    device.synchronize()
    if int(device.to_host(plan.enable)[0]) == 0:
        warnings.warn(f"kv-canary verify skipped this step: the plan needs more than verify_capacity="
                      f"{verify_capacity} entries (enable=0)", VerifySkippedWarning, stacklevel=2)
        return True
    return False


def check_capacity(problem: PlanProblem, answer: int) -> bool:
    """``answer`` must be the smallest verify_capacity that keeps ``enable == 1`` for ``problem``."""
    answer = int(answer)
    if answer < 1:
        print("wrong: a VerifyPlan needs verify_capacity >= 1")
        return False
    enable = int(run_plan(problem, answer, max(problem.bs, 1), kernel=False)["enable"][0])
    smaller = int(run_plan(problem, answer - 1, max(problem.bs, 1), kernel=False)["enable"][0]) \
        if answer > 1 else 0
    if enable == 1 and smaller == 0:
        print(f"right: {answer} entries (padding rows verify nothing; an SWA row verifies at most the window)")
        return True
    if enable == 0:
        print(f"wrong: with verify_capacity={answer} the plan overflows (enable=0): every step would go unverified")
    else:
        print(f"wrong: {answer} works but is not the smallest; count each real row's verified positions")
    return False
