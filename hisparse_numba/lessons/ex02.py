"""Lesson 02 (kv-canary verify_capacity): the scenario, the unchecked plan, sglang's texts, the
checker and the lesson's figure."""

from __future__ import annotations

import numpy as np

from .. import device
from ..kv_canary import VerifyOrWriteContext, VerifyPlan, WritePlan
from ..kv_canary.examples import assert_plans_equal, plan_problem, run_plan, run_step
from ..kv_canary.plan import check_canary_plan, launch_unchecked
from .common import checker, figure, learner_call, report, show, wrong

BS, TOPK, PREFIX, MAX_SEQ_LEN = 4, 16, 25, 32
NUM_SLOTS = (BS + 1) * MAX_SEQ_LEN  # slot ids of the linear req_to_token table

# sglang's torch reference (kv_canary plan_ref.py) raises this text when called directly and, on any
# device other than CUDA, when reached through launch_canary_plan_kernels.
SGLANG_TORCH_REFERENCE_MESSAGE = ("kv-canary: launch_canary_plan_kernels_torch_reference "
                                  "verify_capacity={verify_capacity} does not match "
                                  "verify_plan_out.verify_slot_indices.shape[0]={plan_verify_capacity}")


def sglang_torch_reference_message(verify_capacity: int, plan_verify_capacity: int) -> str:
    return SGLANG_TORCH_REFERENCE_MESSAGE.format(verify_capacity=verify_capacity,
                                                 plan_verify_capacity=plan_verify_capacity)


def decode_step(prefix: int = PREFIX):
    """The plan inputs of one decode step: 4 requests (pool rows 1..4) with ``prefix`` cached tokens."""
    return plan_problem(list(range(1, BS + 1)), [prefix] * BS, [1] * BS, max_reqs=BS + 1,
                        max_seq_len=MAX_SEQ_LEN)


def tokens():
    return (np.arange((BS + 1) * MAX_SEQ_LEN, dtype=np.int64) * 13 + 5).reshape(BS + 1, MAX_SEQ_LEN)


def written_context():
    """A canary buffer holding the 25-token history of every request (written by a prefill step)."""
    ctx = VerifyOrWriteContext.allocate(NUM_SLOTS, ring_capacity=16)
    prefill = plan_problem(list(range(1, BS + 1)), [0] * BS, [PREFIX] * BS, max_reqs=BS + 1,
                           max_seq_len=MAX_SEQ_LEN)
    run_step(prefill, ctx, tokens(), kernel=True)
    device.synchronize()
    return ctx


def plan_without_the_check(*, verify_plan_out, write_plan_out, verify_capacity, problem):
    """What the plan kernels do with a capacity that nobody compared to the plan: an accepted call
    with its capacity replaced, launched without the check. Never call this with a capacity above
    the plan's length on a GPU: the entries kernel would write past the end of the four arrays."""
    call = check_canary_plan(verify_plan_out=verify_plan_out, write_plan_out=write_plan_out,
                             verify_capacity=int(verify_plan_out.verify_slot_indices.shape[0]),
                             **problem.inputs(to_device=True))
    launch_unchecked(call._replace(verify_capacity=int(verify_capacity)))
    device.synchronize()


NOT_WRITTEN = -7
CASES = ((PREFIX, 384), (PREFIX, BS * PREFIX), (PREFIX, BS * PREFIX - 1), (3, 7))


@checker
def check_plan_step(plan_step) -> bool:
    """Exercise 02-a: ``plan_step(verify_plan, write_plan, inputs)`` calls
    ``launch_canary_plan_kernels`` with ``inputs`` (every other keyword) and a ``verify_capacity``
    that matches ``verify_plan``. Checked with four plan sizes (roomy, exactly full, one short,
    tiny) against the NumPy reference."""
    for prefix, cap in CASES:
        problem = decode_step(prefix)
        vp, wp = VerifyPlan.allocate(cap), WritePlan.allocate(BS)
        vp.verify_num_valid[...] = NOT_WRITTEN
        learner_call(plan_step, vp, wp, problem.inputs(to_device=True))
        device.synchronize()
        got = {k: device.to_host(v) for k, v in {**vp.arrays(), **wp.arrays()}.items()}
        want = run_plan(problem, cap, BS, kernel=False)
        if int(got["verify_num_valid"][0]) == NOT_WRITTEN:
            wrong(f"with a plan of {cap} entries nothing was planned: did plan_step call "
                  "launch_canary_plan_kernels?")
        n = min(problem.needed_verify_entries(), cap) if want["enable"][0] else 0
        for k in want:
            if k.startswith("verify_") and k != "verify_num_valid":
                got[k], want[k] = got[k][:n], want[k][:n]
        try:
            assert_plans_equal(got, want)
        except AssertionError:
            wrong(f"with a plan of {cap} entries the plan differs from the NumPy reference")
    return report(True, "the capacity comes from the plan itself, for every plan size", "")


def draw_capacity(needed: int, plan_length: int, verify_capacity: int) -> None:
    """One bar per number: entries the step needs, the plan's real length, the number passed."""
    fig, (ax,) = figure(7, 1.8)
    names = ["entries needed", "plan length (C)", "verify_capacity passed"]
    values = [needed, plan_length, verify_capacity]
    colors = ["#8fbce6", "#7ccf7c", "#e8604c" if verify_capacity != plan_length else "#7ccf7c"]
    ax.barh(names, values, color=colors)
    for y, v in enumerate(values):
        ax.text(v, y, f" {v}", va="center", fontsize=8)
    ax.axvline(needed, color="black", linestyle=":", linewidth=1)
    ax.set_xlabel("entries (dotted: what this step needs; a capacity left of it disables verify)")
    ax.invert_yaxis()
    show(fig)
