"""The device-side value checks (plan_checks, write_checks, verify_checks): kernel verdict equals
the NumPy verdict, each rejection comes before anything is written, ``checks="shapes"`` skips them."""

import math

import numpy as np
import pytest

from hisparse_numba import device, value_flags
from hisparse_numba.kv_canary import (
    RealKvHashMode,
    RealKvSource,
    VerifyOrWriteContext,
    VerifyPlan,
    check_canary_plan,
    launch_canary_plan_kernels,
    launch_canary_plan_kernels_reference,
    launch_canary_verify_kernel,
    launch_canary_write_kernel,
    launch_canary_write_kernel_reference,
)
from hisparse_numba.kv_canary import context as context_module
from hisparse_numba.kv_canary import plan_checks, verify_checks, write_checks
from hisparse_numba.kv_canary.examples import (
    allocate_plans,
    context_pair,
    context_state,
    plan_problem,
    real_kv_pool,
    run_step,
    step_inputs,
)

TOKENS = np.arange(4 * 8, dtype=np.int64).reshape(4, 8) * 5 + 1


def _plan_kwargs(p, vp, wp, *, kernel=True):
    return dict(verify_plan_out=vp, write_plan_out=wp, verify_capacity=int(vp.verify_slot_indices.shape[0]),
                **p.inputs(to_device=kernel))


def _bytes(arrays):
    return {k: device.to_host(v).tobytes() for k, v in arrays.items()}


# ---- kernel verdict == NumPy verdict ----

@pytest.mark.parametrize("seed", range(3))
def test_plan_verdict_kernel_equals_reference(seed):
    rng = np.random.default_rng(seed)
    for _ in range(4):
        bs, max_reqs, width = int(rng.integers(1, 40)), int(rng.integers(1, 6)), int(rng.integers(1, 9))
        rp = rng.integers(-2, max_reqs + 2, bs).astype(np.int64)
        prefix = rng.integers(-3, width + 3, bs).astype(np.int64)
        extend = rng.integers(-2, width + 2, bs).astype(np.int64)
        pool_rows = int(rng.integers(-1, max_reqs + 1))
        args = (rp, prefix, extend, max_reqs, width, pool_rows)
        want = plan_checks.plan_value_verdict_reference(*args)
        dev = tuple(device.to_device(a) for a in args[:3]) + args[3:]
        got = value_flags.check_flags(plan_checks.plan_value_check_kernel, *plan_checks._value_geometry(bs), *dev)
        assert got == want


@pytest.mark.parametrize("seed", range(3))
def test_write_verdict_kernel_equals_reference(seed):
    rng = np.random.default_rng(10 + seed)
    for _ in range(4):
        rows, n, num_slots = int(rng.integers(1, 7)), int(rng.integers(0, 24)), int(rng.integers(4, 40))
        offsets = np.sort(rng.integers(0, n + 1, rows + 1)).astype(np.int64)
        if rng.random() < 0.3:
            offsets[rng.integers(0, rows + 1)] = rng.integers(-2, n + 3)
        seeds = rng.integers(-2, num_slots + 2, rows).astype(np.int64)
        loc = rng.integers(-2, num_slots + 2, n).astype(np.int64)
        valid = np.array([rng.integers(-1, rows + 2)], dtype=np.int32)
        args = (offsets, seeds, valid, loc, num_slots)
        want = write_checks.write_value_verdict_reference(*args)
        marks = value_flags.claim_table(num_slots, planes=2)
        dev = tuple(device.to_device(a) for a in args[:4]) + (num_slots, marks)
        got = value_flags.check_flags(write_checks.write_value_check_kernel, *write_checks._rows_geometry(rows), *dev)
        seed_cond = write_checks.SLOT_IS_SEED
        assert got[:seed_cond] == want[:seed_cond] and got[seed_cond + 1:] == want[seed_cond + 1:]
        # a slot that is also a seed is seen by its writer, its reader or both: compare the verdict
        assert (got[seed_cond][0] > 0, got[seed_cond][1]) == (want[seed_cond][0] > 0, want[seed_cond][1])


@pytest.mark.parametrize("seed", range(3))
def test_verify_verdict_kernel_equals_reference(seed):
    rng = np.random.default_rng(20 + seed)
    for _ in range(4):
        cap, num_slots = int(rng.integers(1, 100)), int(rng.integers(1, 40))
        slots = rng.integers(-num_slots - 2, num_slots + 2, cap).astype(np.int64)
        prev = rng.integers(-3, num_slots + 2, cap).astype(np.int64)
        num_valid = np.array([rng.integers(-2, cap + 3)], dtype=np.int32)
        enable = np.array([rng.integers(0, 2)], dtype=np.int32)
        args = (slots, prev, num_valid, enable, num_slots)
        want = verify_checks.verify_value_verdict_reference(*args)
        dev = tuple(device.to_device(a) for a in args[:4]) + (num_slots,)
        got = value_flags.check_flags(verify_checks.verify_value_check_kernel, *verify_checks._entries_geometry(cap), *dev)
        assert got == want


def test_repeat_stamps_do_not_leak_between_calls_and_epochs_wrap():
    """Each check on a stream has its own claim epoch (the check kernel advances it): the same
    slots in consecutive calls are no repeat, and before the int32 epochs overflow they start
    again at 1 with new claim tables. A repeat inside one call is still one, before and after."""
    rows = (np.array([0, 2], np.int64), np.array([-1], np.int64), np.array([1], np.int32))
    dev = tuple(device.to_device(a) for a in rows)
    clean, repeated = device.to_device(np.array([3, 4], np.int64)), device.to_device(np.array([3, 3], np.int64))
    slot = value_flags._stream_slot()
    slot.flags[value_flags.EPOCH_WORD] = slot.epoch = value_flags.EPOCH_LIMIT - 2
    for call in range(4):  # the epochs cross the limit at the third call
        marks = value_flags.claim_table(8, planes=2)
        got = value_flags.check_flags(write_checks.write_value_check_kernel, 1, 8, *dev, clean, 8, marks)
        assert got == [(0, -1)] * value_flags.CHECK_CONDITIONS, call
        assert int(slot.flags[value_flags.EPOCH_WORD]) == slot.epoch
    assert slot.epoch < 10
    got = value_flags.check_flags(write_checks.write_value_check_kernel, 1, 8, *dev, repeated, 8,
                                  value_flags.claim_table(8, planes=2))
    assert got[write_checks.SLOT_TWICE][0] == 1


# ---- rejected before anything is written ----

@pytest.mark.parametrize("kernel", [True, False])
def test_pool_with_fewer_rows_than_the_requests_is_rejected(kernel):
    p = plan_problem([1, 3], [4, 2], [1, 1], max_reqs=4, max_seq_len=8)
    p.req_to_verify_expected_tokens = np.zeros((3, 8), np.int32)
    p.req_to_verify_expected_tokens_valid_lens = np.full(2, 8, np.int64)
    vp, wp = allocate_plans(16, 2, host=not kernel)
    before = _bytes({**vp.arrays(), **wp.arrays()})
    fn = launch_canary_plan_kernels if kernel else launch_canary_plan_kernels_reference
    with pytest.raises(ValueError, match=r"req_to_verify_expected_tokens has 3 rows, but req_pool_indices\[1\]=3"):
        fn(**_plan_kwargs(p, vp, wp, kernel=kernel))
    assert _bytes({**vp.arrays(), **wp.arrays()}) == before


@pytest.mark.parametrize("bad,message", [
    (dict(req_pool_indices=[1, 4]), r"req_pool_indices\[1\]=4 is not a row of req_to_token"),
    (dict(req_pool_indices=[-1, 2]), r"req_pool_indices\[0\]=-1 is not a row of req_to_token"),
    (dict(prefix_lens=[9, 2]), r"prefix_lens\[0\]=9 exceeds req_to_token's max_seq_len=8"),
    (dict(extend_seq_lens=[1, 7]), r"extend_seq_lens\[1\]=7 with prefix_lens\[1\]=2 runs past"),
])
def test_plan_values_rejected_on_the_device(bad, message):
    rows = dict(req_pool_indices=[1, 2], prefix_lens=[4, 2], extend_seq_lens=[1, 1]) | bad
    p = plan_problem(rows["req_pool_indices"], rows["prefix_lens"], rows["extend_seq_lens"], max_reqs=4,
                     max_seq_len=8)
    vp, wp = allocate_plans(16, 2)
    before = _bytes({**vp.arrays(), **wp.arrays()})
    with pytest.raises(ValueError, match=message):
        launch_canary_plan_kernels(**_plan_kwargs(p, vp, wp))
    assert _bytes({**vp.arrays(), **wp.arrays()}) == before
    launch_canary_plan_kernels(**_plan_kwargs(plan_problem([0, 2], [4, 2], [1, 1], max_reqs=4), vp, wp))


def test_real_kv_source_too_short_for_the_slots_is_rejected():
    rng = np.random.default_rng(0)
    pool = real_kv_pool(rng, 16, page_size=2, bytes_per_token=32)  # 8 rows: 16 slots
    src = (RealKvSource(pool, 2, 32, 32),)
    ctx = VerifyOrWriteContext.allocate(32, real_kv_sources=src, real_kv_hash_mode=RealKvHashMode.PARTIAL)
    vp, wp = allocate_plans(4, 1)
    before = context_state(ctx)
    with pytest.raises(ValueError, match=r"real_kv_sources\[0\] covers 16 slots .* fewer than canary_buf's 32 slots"):
        launch_canary_verify_kernel(context=ctx, plan=vp, check_verify_expected_token=False)
    after = context_state(ctx)
    assert all(before[k].tobytes() == after[k].tobytes() for k in before)
    # mode NONE reads no source: accepted
    ctx_none = VerifyOrWriteContext(**{**ctx.__dict__, "real_kv_hash_mode": int(RealKvHashMode.NONE)})
    vp.enable[...] = 0
    launch_canary_verify_kernel(context=ctx_none, plan=vp, check_verify_expected_token=False)


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("case", ["duplicate", "seed", "past", "offsets"])
def test_write_values_rejected_before_anything_is_written(kernel, case):
    p = plan_problem([1, 2], [3, 2], [2, 1], max_reqs=3, max_seq_len=8)
    dev, host = context_pair(24)
    ctx = dev if kernel else host
    _, wp = run_step(plan_problem([1, 2], [0, 0], [3, 2], max_reqs=3, max_seq_len=8), ctx, TOKENS, kernel=kernel)
    vp, wp = run_step(p, ctx, TOKENS, kernel=kernel, write=False)
    inputs = step_inputs(p, TOKENS)
    loc = inputs["out_cache_loc"]  # [11, 12, 18]; seeds 10 and 17
    message = {"duplicate": "writes slot 11 more than once", "seed": "writes slot 17, which a row of",
               "past": r"out_cache_loc\[2\]=24 is past canary_buf's 24 slots",
               "offsets": r"plan.write_offsets\[0\]=0 and plan.write_offsets\[1\]=9"}[case]
    if case == "duplicate":
        loc[1] = 11
    elif case == "seed":
        loc[2] = 17
    elif case == "past":
        loc[2] = 24
    conv = device.to_device if kernel else (lambda a: a)
    if case == "offsets":
        offsets = device.to_host(wp.write_offsets).copy()
        offsets[1] = 9
        wp.write_offsets[...] = conv(offsets)
    before = context_state(ctx)
    fn = launch_canary_write_kernel if kernel else launch_canary_write_kernel_reference
    with pytest.raises(ValueError, match=message):
        fn(context=ctx, plan=wp, enable_write_input_assert=False, expected_input_tokens=None,
           expected_input_positions=None, **{k: conv(v) for k, v in inputs.items()})
    after = context_state(ctx)
    assert all(before[k].tobytes() == after[k].tobytes() for k in before)


def test_verify_values_rejected_before_anything_is_written():
    dev, _ = context_pair(16)
    vp = VerifyPlan.allocate(4)
    for name, values, message in (("verify_slot_indices", [1, 2, 16, 3], r"verify_slot_indices\[2\]=16 is outside"),
                                  ("verify_slot_indices", [1, -17, 0, 3], r"verify_slot_indices\[1\]=-17 is outside"),
                                  ("verify_prev_slot_indices", [0, 16, 1, 2], r"verify_prev_slot_indices\[1\]=16")):
        for other in ("verify_slot_indices", "verify_prev_slot_indices", "verify_expected_positions",
                      "verify_expected_tokens"):
            getattr(vp, other)[...] = device.to_device(np.array([1, 2, 3, 4], np.int64))
        getattr(vp, name)[...] = device.to_device(np.array(values, np.int64))
        vp.verify_num_valid[...] = 4
        before = context_state(dev)
        with pytest.raises(ValueError, match=message):
            launch_canary_verify_kernel(context=dev, plan=vp, check_verify_expected_token=False)
        after = context_state(dev)
        assert all(before[k].tobytes() == after[k].tobytes() for k in before)
        vp.verify_num_valid[...] = 2 if name == "verify_slot_indices" and values[2] == 16 else 1
        launch_canary_verify_kernel(context=dev, plan=vp, check_verify_expected_token=False)  # not read: fine


# ---- checks="full" is one pass; "shapes" skips it ----

def test_full_checks_are_one_device_pass_and_shapes_skips_them(monkeypatch):
    calls = []
    real = value_flags.start_check
    monkeypatch.setattr(value_flags, "start_check", lambda *a, **kw: calls.append(a[0]) or real(*a, **kw))
    p = plan_problem([1, 2], [0, 0], [3, 2], max_reqs=3, max_seq_len=8)
    dev, _ = context_pair(24)
    for checks, per_call in (("full", 1), ("shapes", 0)):
        vp, wp = allocate_plans(8, 2)
        calls.clear()
        launch_canary_plan_kernels(**_plan_kwargs(p, vp, wp), checks=checks)
        launch_canary_verify_kernel(context=dev, plan=vp, check_verify_expected_token=False, checks=checks)
        launch_canary_write_kernel(context=dev, plan=wp, enable_write_input_assert=False, expected_input_tokens=None,
                                   expected_input_positions=None, checks=checks,
                                   **{k: device.to_device(v) for k, v in step_inputs(p, TOKENS).items()})
        assert len(calls) == 3 * per_call
    with pytest.raises(ValueError, match='checks must be "full" or "shapes", got .none.'):
        launch_canary_verify_kernel(context=dev, plan=vp, check_verify_expected_token=False, checks="none")


# ---- scalars are validated, not coerced ----

@pytest.mark.parametrize("value", [16.5, 16.0, math.inf, math.nan, "16", None, True])
def test_scalars_are_rejected_with_a_type_error(value):
    p = plan_problem([1], [2], [1], max_reqs=2, max_seq_len=8)
    vp, wp = allocate_plans(16, 1)
    kw = _plan_kwargs(p, vp, wp)
    for name in ("verify_capacity", "swa_window_size", "kv_token_id_vs_position_offset"):
        with pytest.raises(TypeError, match=f"kv-canary: {name} must be an integer"):
            check_canary_plan(**{**kw, name: value})
    with pytest.raises(TypeError, match="verify_capacity must be an integer"):
        VerifyPlan.allocate(value)
    if value is not True:
        with pytest.raises(TypeError, match="check_verify_expected_token must be True or False"):
            launch_canary_verify_kernel(context=context_pair(16)[0], plan=vp, check_verify_expected_token=value)


def test_numpy_integers_are_accepted():
    p = plan_problem([1], [2], [1], max_reqs=2, max_seq_len=8)
    vp, wp = allocate_plans(16, 1)
    kw = _plan_kwargs(p, vp, wp)
    launch_canary_plan_kernels(**{**kw, "verify_capacity": np.int64(16), "swa_window_size": np.int32(0),
                                  "kv_token_id_vs_position_offset": np.int16(1)})
    VerifyPlan.allocate(np.int32(4))


# ---- a real-KV source's parameter table is copied once, not per call ----

def test_real_kv_parameter_table_is_cached():
    pool = real_kv_pool(np.random.default_rng(1), 16, page_size=1, bytes_per_token=32)
    ctx = VerifyOrWriteContext.allocate(16, real_kv_sources=(RealKvSource(pool, 1, 32, 32),),
                                        real_kv_hash_mode=RealKvHashMode.ALL)
    words, params, n = context_module.source_arguments(ctx)
    words2, params2, n2 = context_module.source_arguments(ctx)
    assert params2 is params and n == n2 == 1 and all(a is b for a, b in zip(words, words2))
    partial = VerifyOrWriteContext(**{**ctx.__dict__, "real_kv_hash_mode": int(RealKvHashMode.PARTIAL)})
    assert context_module.source_arguments(partial)[1] is not params  # another table: another entry
