"""Lesson 02's checker says right for the fix and wrong for the config-math capacity."""

from hisparse_numba.kv_canary import launch_canary_plan_kernels
from hisparse_numba.lessons import ex02


def test_checker_accepts_the_fix(capsys):
    def plan_step(verify_plan, write_plan, inputs):
        launch_canary_plan_kernels(verify_plan_out=verify_plan, write_plan_out=write_plan,
                                   verify_capacity=int(verify_plan.verify_slot_indices.shape[0]), **inputs)

    assert ex02.check_plan_step(plan_step)
    assert capsys.readouterr().out.startswith("right:")


def test_checker_rejects_config_math(capsys):
    def plan_step(verify_plan, write_plan, inputs):
        launch_canary_plan_kernels(verify_plan_out=verify_plan, write_plan_out=write_plan,
                                   verify_capacity=ex02.BS * ex02.TOPK, **inputs)

    assert not ex02.check_plan_step(plan_step)
    out = capsys.readouterr().out
    assert out.startswith("wrong:") and "does not match verify_plan_out.verify_slot_indices.shape[0]=384" in out
