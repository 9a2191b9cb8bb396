"""Lesson 02's checker: right for the plan's own length, wrong (with sglang's text) otherwise."""

import pytest

from hisparse_numba.kv_canary import launch_canary_plan_kernels
from hisparse_numba.lessons import ex02
from tests.lessons.verdicts import assert_verdict


def call_with(capacity_of):
    def plan_step(verify_plan, write_plan, inputs):
        launch_canary_plan_kernels(verify_plan_out=verify_plan, write_plan_out=write_plan,
                                   verify_capacity=capacity_of(verify_plan), **inputs)
    return plan_step


def forgets_to_call(verify_plan, write_plan, inputs):
    return None


def stub(verify_plan, write_plan, inputs):
    raise NotImplementedError("pass the plan's own length (about 2 lines)")


@pytest.mark.parametrize("fn,word,names", [
    (call_with(lambda vp: int(vp.verify_slot_indices.shape[0])), "right", ()),
    (call_with(lambda vp: ex02.BS * ex02.TOPK), "wrong",
     ("launcher rejects", "does not match verify_plan_out.verify_slot_indices.shape[0]=384")),
    (call_with(lambda vp: 3 * 128), "wrong", ("verify_capacity=384", "shape[0]=100")),
    (call_with(lambda vp: ex02.BS * ex02.PREFIX), "wrong", ("shape[0]=384",)),
    (call_with(lambda vp: vp.verify_slot_indices.shape), "wrong", ("launcher rejects", "verify_capacity must be an integer")),
    (forgets_to_call, "wrong", ("nothing was planned",)),
    (stub, "not yet", ("about 2 lines",)),
])
def test_check_plan_step(capsys, fn, word, names):
    assert_verdict(capsys, ex02.check_plan_step(fn), word, *names)


def test_sglang_torch_reference_text():
    assert ex02.sglang_torch_reference_message(64, 384) == (
        "kv-canary: launch_canary_plan_kernels_torch_reference verify_capacity=64 does not match "
        "verify_plan_out.verify_slot_indices.shape[0]=384")
