"""Host checks remembered per set of buffers (checks.remember_host_checks): a repeated call on the
same buffers skips them, anything that changes a fact the checks read runs them again."""

import numpy as np
import pytest

from hisparse_numba import checks, device
from hisparse_numba.hisparse.single_step import checks as sc
from hisparse_numba.hisparse.single_step.examples import make_swap_in_problem, to_device_problem


def problem():
    p = make_swap_in_problem(np.random.default_rng(3), batch=2, num_top_k=8, hot_buffer_size=16)
    return to_device_problem(p)


def test_a_repeated_call_on_the_same_buffers_gets_the_remembered_call():
    p = problem()
    first = sc.check_swap_in(**p, checks="shapes")
    assert sc.check_swap_in(**p, checks="shapes") is first


def test_a_changed_fact_runs_the_checks_again():
    p = problem()
    first = sc.check_swap_in(**p, checks="shapes")
    assert sc.check_swap_in(**dict(p, block_size=64), checks="shapes") is not first
    other = dict(p, top_k_tokens=device.to_device(device.to_host(p["top_k_tokens"])))
    assert sc.check_swap_in(**other, checks="shapes") is not first      # another array, same values
    bad = dict(p, top_k_tokens=p["top_k_tokens"][:, :4])                   # same address, new shape
    with pytest.raises(ValueError):
        sc.check_swap_in(**bad, checks="shapes")


def test_value_checks_still_run_on_a_remembered_call():
    p = problem()
    sc.check_swap_in(**p)
    p["req_pool_indices"][...] = device.to_device(np.full(2, -1, np.int64))  # values, not facts
    with pytest.raises(ValueError, match="req_pool_indices"):
        sc.check_swap_in(**p)


def test_plans_and_contexts_are_remembered_field_by_field():
    from hisparse_numba.kv_canary.examples import allocate_plans
    vp, _ = allocate_plans(4, 2)
    arrays = checks.argument_arrays({"plan": vp, "n": 3})
    assert any(a is vp.verify_slot_indices for a, *_ in arrays)
    assert checks.argument_arrays({"x": object()}) is None
    assert checks.argument_arrays({"x": [vp.enable]}) is None          # a list can change in place


def test_an_array_reshaped_in_place_runs_the_checks_again():
    p = problem()
    first = sc.check_swap_in(**p, checks="shapes")
    p["top_k_tokens"].shape = (p["top_k_tokens"].size,)                 # same object, new layout
    with pytest.raises(ValueError, match="top_k_tokens"):
        sc.check_swap_in(**p, checks="shapes")
    assert first is not None
