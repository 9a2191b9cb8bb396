"""Seeded differential fuzz of the kv-canary pipeline: random valid configurations run plan ->
verify -> write on the kernels and on the NumPy references; every plan field, every canary byte,
both counters, the ring index and the new ring rows (as a multiset, ``examples.assert_states_equal``)
must be identical. 1,000 configurations on a GPU, 20 in the simulator; configuration ``i`` draws
from ``numpy.random.default_rng([SEED, i])``, so a failure names a reproducible configuration."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.kv_canary import RealKvHashMode, RealKvSource
from hisparse_numba.kv_canary.examples import (
    assert_plans_equal,
    assert_states_equal,
    capacities,
    context_pair,
    context_state,
    plan_problem,
    real_kv_pool,
    run_step,
    step_inputs,
)

from ..conftest import ON_GPU
from .builders import check_write_slots_distinct, random_plan_problem

SEED = 77
CONFIGS = 1000 if ON_GPU else 20


def _plans(plans) -> dict:
    vp, wp = plans
    return {k: device.to_host(v) for k, v in {**vp.arrays(), **wp.arrays()}.items()}


def _step_both(p, dev, host, tokens, **kw):
    """One step on both sides; plans and states byte-identical (ring rows as a multiset)."""
    base = int(context_state(host)["violation_write_index"][0])
    cap = host.violation_ring.shape[0]
    assert_plans_equal(_plans(run_step(p, dev, tokens, kernel=True, **kw)),
                       _plans(run_step(p, host, tokens, kernel=False, **kw)))
    assert_states_equal(context_state(dev), context_state(host), ring_base=min(max(base, 0), cap))


def run_config(rng) -> None:
    # distinct_slots: the write launcher rejects duplicate live slots (a race on the GPU)
    p = random_plan_problem(rng, max_bs=6 if not ON_GPU else 32, seq_lens=(8, 16) if not ON_GPU else (16, 64),
                            distinct_slots=True)
    p.extend_seq_lens = np.maximum(p.extend_seq_lens, 0)
    num_slots = int(p.req_to_token.max()) + 1
    if p.full_to_swa_index_mapping is not None:
        num_slots = max(num_slots, int(p.full_to_swa_index_mapping.max()) + 1)
    page = int(rng.choice([1, 2, 4]))
    pools = [real_kv_pool(rng, num_slots, page_size=page, bytes_per_token=32)]
    sources = (RealKvSource(pools[0], page, 32, int(rng.choice([16, 32]))),)
    if rng.random() < 0.3:
        pools.append(real_kv_pool(rng, num_slots, page_size=1, bytes_per_token=16, dtype=np.float16))
        sources += (RealKvSource(pools[1], 1, 16, 16),)
    ctx_kw = dict(real_kv_sources=sources, real_kv_hash_mode=RealKvHashMode(int(rng.integers(3))),
                  ring_capacity=int(rng.integers(1, 64)), chain_position_assert=bool(rng.integers(2)))
    tokens = rng.integers(-5, 2**40, size=p.req_to_token.shape).astype(np.int64)
    # a history step (the prefixes written), then the fuzzed step, with corruption in between
    hist = plan_problem(p.req_pool_indices, np.zeros(p.bs, np.int64),
                        np.where(p.req_pool_indices != 0, np.minimum(p.prefix_lens, p.req_to_token.shape[1]), 0),
                        req_to_token=p.req_to_token)
    hist.full_to_swa_index_mapping = p.full_to_swa_index_mapping
    check_write_slots_distinct(hist)
    check_write_slots_distinct(p)
    dev, host = context_pair(num_slots, **ctx_kw)
    _step_both(hist, dev, host, tokens)
    flips = rng.integers(1, num_slots, size=2)
    for ctx in (dev, host):
        fields = ctx.canary_buf.view(np.int64)
        fields[flips, 1] = fields[flips, 1] + 1
    if rng.random() < 0.3:  # the sources are shared by both sides: one flip shows in both
        # (NumPy's view: on a GPU the pool is a mapped host array, whose own .view is Numba's)
        np.asarray(pools[0]).reshape(-1).view(np.uint8)[rng.integers(pools[0].nbytes)] ^= 0x10
    vc, wc = capacities(p, str(rng.choice(["loose", "tight", "under_by_one"])))
    expected = None
    if rng.random() < 0.5:
        inputs = step_inputs(p, tokens, pad_tokens=2)
        expected = {"expected_input_tokens": inputs["input_ids"] + (rng.random(inputs["input_ids"].shape) < 0.2),
                    "expected_input_positions": inputs["positions"].copy()}
    _step_both(p, dev, host, tokens, verify_capacity=vc, write_req_capacity=wc, pad_tokens=2,
               check_verify_expected_token=bool(rng.integers(2)), expected=expected)


@pytest.mark.slow  # about 40 s in the simulator, minutes on a GPU (1,000 configurations)
def test_pipeline_fuzz_kernels_equal_references():
    for i in range(CONFIGS):
        try:
            run_config(np.random.default_rng([SEED, i]))
        except AssertionError as e:
            raise AssertionError(f"configuration {i} (numpy.random.default_rng([{SEED}, {i}])): {e}") from e
