"""Write and verify kernels vs references: pipelines, real-KV folding, corruption, counters (the
seeded pipeline fuzz is in ``test_fuzz.py``)."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.kv_canary import (
    CanaryLaunchTag,
    FailReason,
    RealKvHashMode,
    RealKvSource,
    VerifyOrWriteContext,
    VerifyPlan,
    chain_hashes,
    launch_canary_verify_kernel,
    launch_canary_verify_kernel_reference,
    launch_canary_write_kernel,
    launch_canary_write_kernel_reference,
    mix3,
    to_signed64,
)
from hisparse_numba.kv_canary.examples import (
    assert_states_equal,
    context_pair,
    context_state,
    plan_problem,
    real_kv_pool,
    run_step,
    step_inputs,
)

C = FailReason


def pipeline(steps, num_slots, tokens, *, ctx_kw=None, check_token=False, expected=None, pad_tokens=0):
    """Run each step's plan -> verify -> write on kernels and references; assert equal after each."""
    dev, host = context_pair(num_slots, **(ctx_kw or {}))
    for p in steps:
        base = int(context_state(host)["violation_write_index"][0])
        kw = dict(check_verify_expected_token=check_token, pad_tokens=pad_tokens,
                  expected=expected(p) if expected else None)
        run_step(p, dev, tokens, kernel=True, **kw)
        run_step(p, host, tokens, kernel=False, **kw)
        assert_states_equal(context_state(dev), context_state(host), ring_base=min(base, host.violation_ring.shape[0]))
    return dev, host


def ring(ctx):
    s = context_state(ctx)
    n = min(int(s["violation_write_index"][0]), s["violation_ring"].shape[0])
    return s["violation_ring"][:n]


TOKENS = (np.arange(4 * 16, dtype=np.int64).reshape(4, 16) * 7 + 3)


def five_steps():
    """Request row 1: prefill 2, then three decodes; request 2 joins later; a padding row."""
    return [plan_problem([1, 0], [0, 0], [2, 0], max_reqs=4),
            plan_problem([1, 0], [2, 0], [1, 0], max_reqs=4),
            plan_problem([1, 2], [3, 0], [1, 3], max_reqs=4),
            plan_problem([1, 2], [4, 3], [1, 1], max_reqs=4),
            plan_problem([1, 2, 0], [5, 4, 0], [0, 0, 0], max_reqs=4)]


def test_pipeline_chain_values_and_clean_verify():
    dev, host = pipeline(five_steps(), 64, TOKENS)
    s = context_state(host)
    buf = s["canary_buf"].view(np.int64)
    expect = chain_hashes(TOKENS[1, :5], range(5))
    assert [int(x) & (2**64 - 1) for x in buf[16:21, 2]] == expect
    assert list(buf[16:21, 0]) == list(TOKENS[1, :5]) and list(buf[16:21, 1]) == list(range(5))
    assert s["violation_write_index"][0] == 0
    assert s["kernel_run_counter"][0] == 10  # 5 verify + 5 write launches
    # written slots: 2+1+4+2 = 9; verified entries: 0+2+3+7+9 = 21
    assert s["slot_run_counter"][0] == 9 + 21


@pytest.mark.parametrize("mode", [RealKvHashMode.NONE, RealKvHashMode.PARTIAL, RealKvHashMode.ALL])
def test_pipeline_real_kv_modes(mode):
    rng = np.random.default_rng(5)
    pools = [real_kv_pool(rng, 64, page_size=2, bytes_per_token=48),
             real_kv_pool(rng, 64, page_size=1, bytes_per_token=32, dtype=np.float16)]
    sources = (RealKvSource(pools[0], 2, 48, 32), RealKvSource(pools[1], 1, 32, 32))
    dev, host = pipeline(five_steps(), 64, TOKENS, ctx_kw=dict(real_kv_sources=sources, real_kv_hash_mode=mode))
    rk = context_state(host)["canary_buf"].view(np.int64)[16:21, 3]
    assert np.all(rk == 0) if mode == RealKvHashMode.NONE else np.all(rk != 0)
    assert context_state(host)["violation_write_index"][0] == 0


def test_real_kv_pinned_pattern():
    pattern = bytes([1, 2, 4, 8, 0x10, 0x20, 0x40, 0x80, 0x81, 0x82, 0x84, 0x88, 0x90, 0xA0, 0xC0, 0xFF])
    for mode in (RealKvHashMode.PARTIAL, RealKvHashMode.ALL):
        pool = device.host_cache_array((4, 16), np.uint8)
        pool[1] = np.frombuffer(pattern, np.uint8)
        src = (RealKvSource(pool, 1, 16, 16),)
        p = plan_problem([1], [0], [1], max_reqs=2, req_to_token=np.array([[0, 0], [1, 2]], np.int32))
        dev, host = pipeline([p], 4, np.zeros((2, 2), np.int64), ctx_kw=dict(real_kv_sources=src, real_kv_hash_mode=mode))
        assert int(context_state(dev)["canary_buf"].view(np.int64)[1, 3]) & (2**64 - 1) == 0x6041580849E6407D


def test_real_kv_source_checks():
    pool = device.host_cache_array((4, 64), np.uint8)
    with pytest.raises(ValueError, match="num_bytes_per_token must be a positive multiple of 16, got 24"):
        RealKvSource(pool, 1, 24, 16)
    with pytest.raises(ValueError, match="read_bytes must be a positive multiple of 16"):
        RealKvSource(pool, 1, 32, 48)
    with pytest.raises(ValueError, match="page_size=4 x num_bytes_per_token=32 needs 128"):
        RealKvSource(pool, 4, 32, 32)
    dev, _ = context_pair(8)
    too_many = VerifyOrWriteContext(**{**dev.__dict__, "real_kv_sources": (RealKvSource(pool, 1, 16, 16),) * 5})
    vp = VerifyPlan.allocate(4)
    with pytest.raises(ValueError, match="at most 4 RealKvSource entries supported by the CUDA ABI, got 5"):
        launch_canary_verify_kernel(context=too_many, plan=vp, check_verify_expected_token=False)


def test_pipeline_swa_window_and_lut():
    lut = np.arange(64, dtype=np.int64) + 100
    steps = five_steps()
    for p in steps:
        p.swa_window_size = 2
        p.full_to_swa_index_mapping = lut
    pipeline(steps, 256, TOKENS)


def test_token_check_detects_mismatch_via_pool():
    pool = TOKENS.astype(np.int32).copy()
    pool[1, 1] += 1  # the source of truth disagrees with what was written at position 1
    steps = five_steps()[:4]
    for p in steps:
        p.req_to_verify_expected_tokens = pool
        p.req_to_verify_expected_tokens_valid_lens = np.full(p.bs, 16, dtype=np.int64)
    dev, host = pipeline(steps, 64, TOKENS, check_token=True)
    rows = ring(host)
    assert len(rows) == 3  # steps 2, 3 and 4 verify position 1 of request 1
    assert np.all(rows[:, 7] == C.VERIFY_TOKEN_MISMATCH) and np.all(rows[:, 1] == 17)
    assert np.all(rows[:, 3] == TOKENS[1, 1]) and np.all(rows[:, 4] == TOKENS[1, 1] + 1)


def test_write_input_assert_and_chain_position_assert():
    def expected(p):
        e = step_inputs(p, TOKENS)
        toks = e["input_ids"].copy()
        if len(toks) > 1:
            toks[1] += 5
        return {"expected_input_tokens": toks, "expected_input_positions": e["positions"]}

    dev, host = pipeline(five_steps(), 64, TOKENS, expected=expected,
                         ctx_kw=dict(chain_position_assert=True, kernel_kind=CanaryLaunchTag.TAIL_V_SWA))
    rows = ring(host)
    assert np.all(rows[:, 0] == CanaryLaunchTag.TAIL_V_SWA)
    assert np.all(rows[:, 7] == C.WRITE_TOKEN_MISMATCH)
    # the chain advanced on the actual inputs: verify stayed clean (no VERIFY bits)


def test_chain_position_assert_fires_on_gap():
    p1 = plan_problem([1], [0], [3], max_reqs=2)
    p2 = plan_problem([1], [3], [1], max_reqs=2)
    dev, host = context_pair(64, chain_position_assert=True)
    for ctx, kernel in ((dev, True), (host, False)):
        run_step(p1, ctx, TOKENS, kernel=kernel)
        bad = TOKENS.copy()
        vp, wp = run_step(p2, ctx, bad, kernel=kernel, write=False)
        args = step_inputs(p2, bad)
        args["positions"][:] = 7  # should be 3
        conv = device.to_device if kernel else (lambda a: a)
        fn = launch_canary_write_kernel if kernel else launch_canary_write_kernel_reference
        fn(context=ctx, plan=wp, enable_write_input_assert=False, expected_input_tokens=None,
           expected_input_positions=None, **{k: conv(v) for k, v in args.items()})
    assert_states_equal(context_state(dev), context_state(host))
    rows = ring(host)
    assert len(rows) == 1 and rows[0, 7] == C.WRITE_POSITION_MISMATCH and rows[0, 6] == 3 and rows[0, 2] == 7


# ---- corruption: verify reports the right bits at the right slot ----

def corrupt_and_verify(corrupt, *, ctx_kw=None, check_token=False, steps=None):
    """Write request 1 positions 0..4, corrupt, then verify prefix 5 on both sides."""
    steps = steps or [plan_problem([1], [0], [5], max_reqs=4)]
    dev, host = pipeline(steps, 64, TOKENS, ctx_kw=ctx_kw)
    check = plan_problem([1], [5], [0], max_reqs=4)
    for ctx, kernel in ((dev, True), (host, False)):
        corrupt(ctx, check)
    for ctx, kernel in ((dev, True), (host, False)):
        run_step(check, ctx, TOKENS, kernel=kernel, write=False, check_verify_expected_token=check_token)
    assert_states_equal(context_state(dev), context_state(host))
    rows = ring(host)
    return {int(r[1]): int(r[7]) for r in rows}, rows


def _buf(ctx):
    return ctx.canary_buf.view(np.int64) if isinstance(ctx.canary_buf, np.ndarray) else ctx.canary_buf.view(device.xp.int64)


def test_corrupt_canary_token_breaks_successor_chain_only():
    def corrupt(ctx, _):
        _buf(ctx)[18, 0] += 1  # position 2's token
    bits, _ = corrupt_and_verify(corrupt)
    assert bits == {19: C.VERIFY_CHAIN_HASH_MISMATCH}


def test_corrupt_canary_position():
    def corrupt(ctx, _):
        _buf(ctx)[17, 1] = 9
    bits, rows = corrupt_and_verify(corrupt)
    assert bits == {17: C.VERIFY_POSITION_MISMATCH, 18: C.VERIFY_CHAIN_HASH_MISMATCH}


def test_corrupt_prev_hash():
    def corrupt(ctx, _):
        _buf(ctx)[20, 2] ^= 1
    bits, rows = corrupt_and_verify(corrupt)
    assert bits == {20: C.VERIFY_CHAIN_HASH_MISMATCH}
    assert rows[0, 6] == to_signed64(mix3(*[int(x) for x in context_state_row(rows, 19)]))


def context_state_row(rows, slot):
    tok = TOKENS[1, slot - 16]
    return [chain_hashes(TOKENS[1, :5], range(5))[slot - 16], tok, slot - 16]


def test_overwrite_whole_canary_row_by_another_request():
    def corrupt(ctx, _):
        b = _buf(ctx)
        b[18] = b[16]  # another chain's head stamped over position 2
    bits, _ = corrupt_and_verify(corrupt)
    assert bits == {18: C.VERIFY_CHAIN_HASH_MISMATCH | C.VERIFY_POSITION_MISMATCH,
                    19: C.VERIFY_CHAIN_HASH_MISMATCH}


def flip_pool_bits(page_size, mode, flips):
    """Verify bits after XOR-ing ``(row, byte, mask)`` into a real-KV pool once (the pool is
    shared by the kernel and the reference side)."""
    pool = real_kv_pool(np.random.default_rng(9), 64, page_size=page_size, bytes_per_token=32,
                        row_padding=0)
    ctx_kw = dict(real_kv_sources=(RealKvSource(pool, page_size, 32, 32),), real_kv_hash_mode=mode)
    pending = list(flips)

    def corrupt(ctx, _):
        while pending:
            row, byte, mask = pending.pop()
            pool[row, byte] ^= mask
    bits, _ = corrupt_and_verify(corrupt, ctx_kw=ctx_kw)
    return bits


def test_overwrite_kv_bytes_sets_real_kv_bit():
    bits = flip_pool_bits(4, RealKvHashMode.ALL, [(18 // 4, (18 % 4) * 32 + 5, 0x40)])
    assert bits == {18: C.VERIFY_REAL_KV_HASH_MISMATCH}


def test_partial_mode_ignores_bytes_after_16():
    # slot 18: a byte outside the first 16; slot 19: one inside
    bits = flip_pool_bits(1, RealKvHashMode.PARTIAL, [(18, 20, 1), (19, 3, 1)])
    assert bits == {19: C.VERIFY_REAL_KV_HASH_MISMATCH}


def test_misrouted_req_to_token():
    """req_to_token of request 1 points position 3 at request 2's slot: verify flags it."""
    steps = [plan_problem([1, 2], [0, 0], [5, 5], max_reqs=4)]

    def corrupt(ctx, check):
        check.req_to_token = check.req_to_token.copy()
        check.req_to_token[1, 3] = 2 * 16 + 3  # request 2, position 3
    bits, _ = corrupt_and_verify(corrupt, steps=steps)
    assert bits == {35: C.VERIFY_CHAIN_HASH_MISMATCH, 20: C.VERIFY_CHAIN_HASH_MISMATCH}


def test_slot_zero_is_skipped_and_disabled_plan_only_counts():
    dev, host = context_pair(16)
    for ctx, kernel in ((dev, True), (host, False)):
        am = device.xp if kernel else np
        vp = VerifyPlan.allocate(4, array_module=am)
        vp.verify_slot_indices[...] = am.asarray([0, 0, 3, 0])
        vp.verify_expected_tokens[...] = -1
        vp.verify_expected_positions[...] = am.asarray([0, 0, 5, 0])
        vp.verify_prev_slot_indices[...] = am.asarray([-1, -1, 0, -1])
        vp.verify_num_valid[...] = 3
        fn = launch_canary_verify_kernel if kernel else launch_canary_verify_kernel_reference
        fn(context=ctx, plan=vp, check_verify_expected_token=True)
        vp.enable[...] = 0
        fn(context=ctx, plan=vp, check_verify_expected_token=True)
    s = context_state(host)
    assert_states_equal(context_state(dev), s)
    assert s["slot_run_counter"][0] == 3 and s["kernel_run_counter"][0] == 2
    assert ring(host)[:, 7].tolist() == [C.VERIFY_POSITION_MISMATCH]  # prev 0: no chain check


def test_ring_overflow_counts_everything():
    steps = [plan_problem([1, 2], [0, 0], [5, 5], max_reqs=4)]
    dev, host = pipeline(steps, 64, TOKENS, ctx_kw=dict(ring_capacity=4))
    check = plan_problem([1, 2], [5, 5], [0, 0], max_reqs=4)
    for ctx, kernel in ((dev, True), (host, False)):
        _buf(ctx)[16:21, 1] += 100
        _buf(ctx)[32:35, 1] += 100
        run_step(check, ctx, TOKENS, kernel=kernel, write=False)
    sd, sh = context_state(dev), context_state(host)
    assert_states_equal(sd, sh)
    # 8 moved positions, plus slot 35 whose predecessor (34) moved: 9 violations, 4 kept
    assert sh["violation_write_index"][0] == 9
    assert np.all(sd["violation_ring"][:, 7] != 0)


def test_negative_out_cache_loc_is_skipped():
    p = plan_problem([1], [0], [4], max_reqs=2)
    dev, host = context_pair(64)
    for ctx, kernel in ((dev, True), (host, False)):
        vp, wp = run_step(p, ctx, TOKENS, kernel=kernel, write=False)
        args = step_inputs(p, TOKENS, pad_tokens=3)
        args["out_cache_loc"][1] = -1
        conv = device.to_device if kernel else (lambda a: a)
        fn = launch_canary_write_kernel if kernel else launch_canary_write_kernel_reference
        fn(context=ctx, plan=wp, enable_write_input_assert=False, expected_input_tokens=None,
           expected_input_positions=None, **{k: conv(v) for k, v in args.items()})
    s = context_state(host)
    assert_states_equal(context_state(dev), s)
    assert s["slot_run_counter"][0] == 3 and np.all(s["canary_buf"].view(np.int64)[17] == 0)


@pytest.mark.parametrize("kernel", [True, False])
def test_write_validation_leaves_buffers_untouched(kernel):
    p = plan_problem([1], [0], [2], max_reqs=2)
    dev, host = context_pair(64)
    ctx = dev if kernel else host
    vp, wp = run_step(p, ctx, TOKENS, kernel=kernel, write=False)
    before = context_state(ctx)
    conv = device.to_device if kernel else (lambda a: a)
    args = {k: conv(v) for k, v in step_inputs(p, TOKENS).items()}
    fn = launch_canary_write_kernel if kernel else launch_canary_write_kernel_reference
    with pytest.raises(ValueError, match="expected input tensors must be None when enable_write_input_assert=False"):
        fn(context=ctx, plan=wp, enable_write_input_assert=False, expected_input_tokens=args["input_ids"],
           expected_input_positions=None, **args)
    with pytest.raises(ValueError, match="expected input tensors are required when enable_write_input_assert=True"):
        fn(context=ctx, plan=wp, enable_write_input_assert=True, expected_input_tokens=None,
           expected_input_positions=None, **args)
    narrow = VerifyOrWriteContext(**{**ctx.__dict__, "canary_buf": ctx.canary_buf[:, :24]})
    with pytest.raises(ValueError, match="canary_buf"):
        fn(context=narrow, plan=wp, enable_write_input_assert=False, expected_input_tokens=None,
           expected_input_positions=None, **args)
    after = context_state(ctx)
    assert all(before[k].tobytes() == after[k].tobytes() for k in before)
