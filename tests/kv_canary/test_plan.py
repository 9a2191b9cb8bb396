"""Plan kernels vs reference: sglang's hand cases, validation, invariants and a seeded fuzz."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.kv_canary import VerifyPlan, WritePlan, launch_canary_plan_kernels, launch_canary_plan_kernels_reference
from hisparse_numba.kv_canary.examples import (
    allocate_plans,
    assert_plans_equal,
    capacities,
    plan_problem,
    run_plan,
)

from .builders import random_plan_problem

ON_GPU = device.backend() == "cuda"  # as tests/conftest.py defines it


def both(problem, vc=None, wc=None):
    """Kernel and reference plans (byte-identical, asserted); returns the reference's."""
    vc = vc or max(problem.needed_verify_entries() + 8, 16)
    wc = wc or max(problem.bs, 1)
    k = run_plan(problem, vc, wc, kernel=True)
    r = run_plan(problem, vc, wc, kernel=False)
    assert_plans_equal(k, r)
    check_invariants(problem, r, vc)
    return r


def check_invariants(problem, plan, cap):
    """Reference-independent invariants (sglang's PlanInvariants)."""
    bs = problem.bs
    off = plan["write_offsets"]
    active = problem.req_pool_indices != 0
    assert np.all(np.diff(off[: bs + 1]) >= 0) and off[0] == 0
    assert off[bs] == np.maximum(problem.extend_seq_lens, 0)[active].sum()
    assert np.all(off[bs + 1:] == 0)
    total = problem.needed_verify_entries()
    assert plan["verify_num_valid"][0] == min(total, cap)
    assert plan["enable"][0] == int(total <= cap)
    assert np.all(plan["write_seed_slot_indices"][:bs][~active] == -1)
    assert plan["write_num_valid_reqs"][0] == bs
    if plan["enable"][0] and total:
        pos = plan["verify_expected_positions"][:total]
        prev = plan["verify_prev_slot_indices"][:total]
        assert np.all((pos == 0) == (prev == -1)) or problem.full_to_swa_index_mapping is not None


# ---- sglang's hand cases (linear req_to_token, max_seq_len 16) ----

def test_single_req_extend_basic():
    r = both(plan_problem([1], [0], [5]))
    assert r["verify_num_valid"][0] == 0 and r["write_num_valid_reqs"][0] == 1
    assert list(r["write_offsets"][:2]) == [0, 5] and r["write_seed_slot_indices"][0] == -1


def test_single_req_decode_and_prev_slots():
    r = both(plan_problem([2], [7], [1]))
    assert r["verify_num_valid"][0] == 7 and r["write_seed_slot_indices"][0] == 2 * 16 + 6
    assert list(r["verify_slot_indices"][:3]) == [32, 33, 34]
    assert list(r["verify_prev_slot_indices"][:3]) == [-1, 32, 33]
    assert list(r["verify_expected_positions"][:7]) == list(range(7))


def test_multi_req_mixed_extend_decode():
    r = both(plan_problem([1, 2, 3], [0, 7, 7], [8, 1, 1]))
    assert list(r["write_offsets"][:4]) == [0, 8, 9, 10] and r["verify_num_valid"][0] == 14


def test_byte_equal_representative():
    r = both(plan_problem([1, 2, 3, 0], [0, 3, 6, 0], [3, 1, 1, 0]))
    assert list(r["write_offsets"][:5]) == [0, 3, 4, 5, 5]
    assert list(r["write_seed_slot_indices"][:3]) == [-1, 2 * 16 + 2, 3 * 16 + 5]


def test_padding_rows_contribute_zero():
    r = both(plan_problem([1, 0, 2], [4, 99999, 4], [1, 1, 1]))
    assert r["verify_num_valid"][0] == 8 and list(r["write_offsets"][:4]) == [0, 1, 1, 2]
    assert r["write_seed_slot_indices"][1] == -1


def test_seed_translated_through_permuted_lut(rng):
    p = plan_problem([1, 2], [5, 3], [1, 2], max_reqs=3)
    lut = rng.permutation(48).astype(np.int64)
    p.full_to_swa_index_mapping = lut
    r = both(p)
    assert list(r["write_seed_slot_indices"][:2]) == [lut[16 + 4], lut[32 + 2]]


def test_swa_window_clip_and_real_predecessor():
    p = plan_problem([1], [200], [1], max_seq_len=256)
    p.swa_window_size = 128
    p.full_to_swa_index_mapping = np.arange(512, dtype=np.int64) + 100
    r = both(p)
    assert r["verify_num_valid"][0] == 128 and r["verify_expected_positions"][0] == 72
    assert r["verify_prev_slot_indices"][0] == 256 + 71 + 100 and r["verify_slot_indices"][0] == 256 + 72 + 100
    assert r["write_seed_slot_indices"][0] == 256 + 199 + 100


def test_swa_prefix_below_window():
    p = plan_problem([1, 2], [3, 200], [1, 1], max_seq_len=256)
    p.swa_window_size = 128
    p.full_to_swa_index_mapping = np.arange(1024, dtype=np.int64)
    r = both(p)
    assert r["verify_num_valid"][0] == 3 + 128


def test_zero_extend_and_zero_prefix():
    r = both(plan_problem([1, 2], [4, 6], [0, 0]))
    assert list(r["write_offsets"][:3]) == [0, 0, 0] and list(r["write_seed_slot_indices"][:2]) == [-1, -1]
    assert r["verify_num_valid"][0] == 10
    r = both(plan_problem([1, 2], [0, 0], [1, 1]))
    assert r["verify_num_valid"][0] == 0 and r["enable"][0] == 1


@pytest.mark.parametrize("kind", ["tight", "under_by_one"])
def test_capacity_exactly_full_vs_one_short(kind):
    p = plan_problem([1, 2, 3], [5, 0, 7], [1, 1, 1])
    vc, wc = capacities(p, kind)
    r = both(p, vc, wc)
    assert r["verify_num_valid"][0] == min(12, vc)
    assert r["enable"][0] == (1 if kind == "tight" else 0)
    if kind == "under_by_one":  # nothing scattered: the poison is still there
        assert np.all(r["verify_slot_indices"] == r["verify_slot_indices"][0])


def test_replay_is_pure():
    p = plan_problem([1, 2], [3, 5], [2, 1])
    assert_plans_equal(run_plan(p, 16, 4, kernel=True), run_plan(p, 16, 4, kernel=True))


def test_shrink_bs_clears_stale_write_offsets():
    for kernel in (True, False):
        plans = allocate_plans(64, 8, host=not kernel)
        run_plan(plan_problem(list(range(1, 9)), [1] * 8, [2] * 8), 64, 8, kernel=kernel, plans=plans)
        r = run_plan(plan_problem([1, 2, 3], [1] * 3, [2] * 3, max_reqs=9), 64, 8, kernel=kernel, plans=plans)
        assert list(r["write_offsets"]) == [0, 2, 4, 6, 0, 0, 0, 0, 0]


def test_expected_token_pool_offset_and_valid_lens():
    p = plan_problem([1, 2], [5, 5], [1, 1], max_reqs=3, max_seq_len=8)
    pool = (1000 * np.arange(3)[:, None] + np.arange(6)[None, :]).astype(np.int32)
    p.req_to_verify_expected_tokens = pool
    p.req_to_verify_expected_tokens_valid_lens = np.array([6, 3], dtype=np.int64)
    r = both(p)
    assert list(r["verify_expected_tokens"][:10]) == [1000, 1001, 1002, 1003, 1004, 2000, 2001, 2002, -1, -1]
    p.kv_token_id_vs_position_offset = 1
    r = both(p)
    assert list(r["verify_expected_tokens"][:10]) == [1001, 1002, 1003, 1004, 1005, 2001, 2002, -1, -1, -1]
    p.req_to_verify_expected_tokens_valid_lens = np.array([99, 0], dtype=np.int64)  # past the width
    r = both(p)
    assert list(r["verify_expected_tokens"][:10]) == [1001, 1002, 1003, 1004, 1005] + [-1] * 5


def test_expected_token_bound_in_swa_window():
    p = plan_problem([1], [5], [1], max_reqs=2, max_seq_len=8)
    p.swa_window_size = 3
    p.full_to_swa_index_mapping = np.arange(16, dtype=np.int64)
    p.req_to_verify_expected_tokens = (1000 + np.arange(16)).astype(np.int32).reshape(2, 8)
    p.req_to_verify_expected_tokens_valid_lens = np.array([4], dtype=np.int64)
    r = both(p)
    assert list(r["verify_expected_tokens"][:3]) == [1010, 1011, -1]


def test_lut_clamp_and_negative_passthrough():
    p = plan_problem([1], [4], [1], max_seq_len=8)
    lut = np.array([0, 5, -1, 7, 9, 11, 13, 15, 17, 19], dtype=np.int64)  # shorter than the slots (8..11)
    p.full_to_swa_index_mapping = lut
    r = both(p)
    assert list(r["verify_slot_indices"][:4]) == [17, 19, 19, 19]


def test_empty_batch():
    r = both(plan_problem([], [], [], max_reqs=2), 4, 2)
    assert r["write_num_valid_reqs"][0] == 0 and r["verify_num_valid"][0] == 0 and r["enable"][0] == 1
    assert list(r["write_offsets"]) == [0, 0, 0]


def test_boundary_sizes():
    bss = (1, 33, 128) if not ON_GPU else (1, 31, 32, 33, 128, 1024, 4096)
    for bs in bss:
        p = plan_problem(list(range(1, bs + 1)), [(7 * i) % 130 for i in range(bs)],
                         [(3 * i) % 5 for i in range(bs)], max_seq_len=130)
        both(p)


# ---- validation: exact messages, nothing written ----

def _kwargs(p, vp, wp, kernel, **over):
    kw = dict(verify_plan_out=vp, write_plan_out=wp, verify_capacity=int(vp.verify_slot_indices.shape[0]),
              **p.inputs(to_device=kernel))
    kw.update(over)
    return kw


def _snapshot(vp, wp):
    return {k: device.to_host(v).tobytes() for k, v in {**vp.arrays(), **wp.arrays()}.items()}


CASES = {
    "capacity": ("verify_capacity={vc_bad} does not match verify_plan_out.verify_slot_indices.shape[0]=16",),
    "swa": ("requires full_to_swa_index_mapping when swa_window_size > 0",),
    "valid_lens": ("requires req_to_verify_expected_tokens_valid_lens when req_to_verify_expected_tokens is set",),
    "write_cap": ("kv-canary: bs=3 exceeds write_req_capacity=2",),
    "bs4096": ("supports at most bs=4096 reqs per launch, got bs=4097",),
    "dtype": ("kv-canary: req_to_token must have dtype int32",),
}


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("case", list(CASES))
def test_validation_before_anything_is_written(kernel, case):
    name = "launch_canary_plan_kernels" if kernel else "launch_canary_plan_kernels_reference"
    fn = launch_canary_plan_kernels if kernel else launch_canary_plan_kernels_reference
    p = plan_problem([1, 2, 3], [2, 3, 4], [1, 1, 1])
    vp, wp = allocate_plans(16, 2 if case == "write_cap" else 4, host=not kernel)
    conv = device.to_device if kernel else (lambda a: a)
    over = {}
    if case == "capacity":
        over["verify_capacity"] = 12
    elif case == "swa":
        over["swa_window_size"] = 4
    elif case == "valid_lens":
        over["req_to_verify_expected_tokens"] = conv(np.zeros((4, 16), np.int32))
    elif case == "bs4096":
        big = plan_problem([1] * 4097, [1] * 4097, [1] * 4097, max_reqs=2)
        vp, wp = allocate_plans(16, 4100, host=not kernel)
        p = big
    elif case == "dtype":
        over["req_to_token"] = conv(p.req_to_token.astype(np.int64))
    before = _snapshot(vp, wp)
    message = CASES[case][0].format(vc_bad=12)
    with pytest.raises(ValueError) as err:
        fn(**_kwargs(p, vp, wp, kernel, **over))
    assert message in str(err.value)
    if case in ("capacity", "swa", "valid_lens", "bs4096"):
        assert str(err.value).startswith(f"kv-canary: {name} ")
    if case == "capacity":
        assert str(err.value) == (f"kv-canary: {name} verify_capacity=12 does not match "
                                  "verify_plan_out.verify_slot_indices.shape[0]=16")
    assert _snapshot(vp, wp) == before


def test_allocate_rejects_zero():
    with pytest.raises(ValueError, match="VerifyPlan verify_capacity must be positive, got 0"):
        VerifyPlan.allocate(0)
    with pytest.raises(ValueError, match="WritePlan write_req_capacity must be positive, got 0"):
        WritePlan.allocate(0)
    assert VerifyPlan.allocation_bytes(10) == 4 * 10 * 8 + 8 and WritePlan.allocation_bytes(4) == 9 * 8 + 4


# ---- seeded fuzz ----

@pytest.mark.parametrize("seed", range(2))
def test_fuzz_kernel_equals_reference(seed):
    rng = np.random.default_rng(1000 + seed)
    n = 25 if not ON_GPU else 100  # 50 cases in the simulator, 200 on a GPU (the reference is a Python loop)
    for it in range(n):
        p = random_plan_problem(rng, max_bs=16 if not ON_GPU else 128,
                                seq_lens=(8, 16, 64, 128, 256) if not ON_GPU else (64, 256, 512))
        kind = ["loose", "tight", "under_by_one"][it % 3]
        vc, wc = capacities(p, kind)
        k = run_plan(p, vc, wc, kernel=True)
        r = run_plan(p, vc, wc, kernel=False)
        assert_plans_equal(k, r)
        check_invariants(p, r, vc)
