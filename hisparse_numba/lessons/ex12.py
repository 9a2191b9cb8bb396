"""Helpers and checker for lesson 12 (kv-canary: SWA without LUT, write capacity, verify overflow)."""

from __future__ import annotations

import warnings

import numpy as np

from .. import device
from ..kv_canary import FailReason
from ..kv_canary.examples import PlanProblem, run_plan
from .common import Verdict, checker, figure, is_unanswered, report, show, whole_number, wrong


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


@checker
def check_capacity(problem: PlanProblem, answer) -> bool:
    """Exercise 12-a: ``answer`` must be the smallest verify_capacity that keeps ``enable == 1``."""
    if is_unanswered(answer):
        raise Verdict("not yet", "replace ... with a number of entries")
    answer = whole_number(answer, "answer")
    if answer < 1:
        wrong("a VerifyPlan needs verify_capacity >= 1")
    enable = int(run_plan(problem, answer, max(problem.bs, 1), kernel=False)["enable"][0])
    smaller = int(run_plan(problem, answer - 1, max(problem.bs, 1), kernel=False)["enable"][0]) \
        if answer > 1 else 0
    if enable == 1 and smaller == 0:
        return report(True, f"{answer} entries (padding rows verify nothing; an SWA row verifies at most "
                      "the window)", "")
    prefixes = [int(x) for x in np.asarray(problem.prefix_lens).tolist()]
    if answer == sum(prefixes):
        wrong(f"{answer} counts every row's whole history: a padding row (request row 0) verifies nothing "
              "and an SWA row only its window")
    if enable == 0:
        wrong(f"with verify_capacity={answer} the plan overflows (enable=0): every step would go unverified")
    wrong(f"{answer} works but is not the smallest; count each real row's verified positions")


def draw_plan_rows(problem: PlanProblem, verify_capacity: int, title: str = "") -> None:
    """One bar per batch row: its history (light), the positions verify checks (blue: all of a
    full-attention row, the window of an SWA row, nothing for a padding row), stacked against
    ``verify_capacity`` (the red line)."""
    swa = problem.swa_window_size
    rows = list(zip(np.asarray(problem.req_pool_indices).tolist(), np.asarray(problem.prefix_lens).tolist()))
    checked = [0 if rid == 0 else (min(p, swa) if swa > 0 else p) for rid, p in rows]
    fig, (left, right) = figure(9, 1.9, ncols=2)
    labels = [f"row {b}" + (" (padding)" if rid == 0 else f" (req {rid})") for b, (rid, _) in enumerate(rows)]
    left.barh(labels, [p for _, p in rows], color="#dddddd", label="history")
    left.barh(labels, checked, color="#8fbce6", label="verified" + (f" (SWA window {swa})" if swa else ""))
    left.invert_yaxis()
    left.legend(fontsize=7, loc="lower right")
    left.set_title("positions per row", fontsize=9)
    start = 0
    for b, n in enumerate(checked):
        right.barh([0], [n], left=[start], color="#8fbce6" if b % 2 == 0 else "#5a8fc4")
        start += n
    right.axvline(verify_capacity, color="#e8604c", linewidth=2)
    right.text(verify_capacity, 0.45, f" verify_capacity={verify_capacity}", color="#e8604c", fontsize=8)
    right.set_yticks([])
    right.set_xlim(0, max(start, verify_capacity) * 1.25 + 1)
    right.set_title(title or f"the plan: {start} entries needed " +
                    ("(fits)" if start <= verify_capacity else "(overflows: enable = 0)"), fontsize=9)
    show(fig)
