"""Random differential fuzz of the speculative swap-in: valid configurations, kernel == reference
byte for byte on every output and state array (docs/speculative-swap-in.md), for every rung.

Seeded and reproducible: configuration ``i`` is drawn from ``default_rng(i)``. 1000 configurations
on a GPU, 20 in the simulator. On a GPU the kernel shapes come from a short list (each compiles
once); batch, real rows, capacity, unbacked positions, tail tokens, selections and the number of
calls on one state vary freely.
"""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.speculative.examples import (make_spec_problem, mismatches,
                                                   run_kernel_and_reference, set_selection,
                                                   snapshot)
from tests.conftest import ON_GPU, slow_on_gpu
from tests.hisparse.test_speculative_random import random_selection
from tests.sweep.speculative import quick_thread_switches

xp = device.xp
CONFIGURATIONS = 1000 if ON_GPU else 20
# (steps, top_k, hot, tail) kernel shapes on a GPU; the simulator draws them freely
GPU_SHAPES = [(2, 64, 128, 8), (4, 64, 128, 8), (3, 256, 512, 16), (4, 512, 256, 4)]


def draw_configuration(rng):
    if ON_GPU:
        steps, top_k, hot, tail = GPU_SHAPES[int(rng.integers(len(GPU_SHAPES)))]
        batch = int(rng.choice([1, 8]))
    else:
        steps, top_k = int(rng.integers(2, 5)), int(rng.choice([4, 8, 16]))
        hot, tail = int(rng.choice([8, 16, 32])), int(rng.integers(0, 5))
        batch = int(rng.integers(1, 4))
    t = steps * top_k
    cap = int(rng.choice([1, max(1, t - hot), max(1, t // 2), t]))
    return dict(batch=batch, steps=steps, top_k=top_k, hot=hot, tail=tail, cap=cap,
                record=bool(rng.integers(2)), calls=int(rng.integers(1, 3)),
                extra_requests=int(rng.integers(0, 2)))


def fuzz_one(seed: int, version=None) -> None:
    rng = np.random.default_rng(seed)
    c = draw_configuration(rng)
    batch, steps, top_k, hot, tail = (c[k] for k in ("batch", "steps", "top_k", "hot", "tail"))
    t = steps * top_k
    seq = 3 * (hot + t)
    n = max(batch + c["extra_requests"], 1)
    if n > hot:
        n = batch
    kw = make_spec_problem(batch=batch, steps=steps, top_k=top_k, hot=hot, tail=tail,
                           item_words=2, scratch_capacity=c["cap"], max_positions=seq,
                           host_rows_per_request=min(seq, 2 * (hot + t)), num_requests=n,
                           record=c["record"], seed=seed)
    hcl = device.to_host(kw["host_cache_locs"])
    hcl[rng.random(hcl.shape) < rng.choice([0.0, 0.05, 0.5])] = -1
    kw["host_cache_locs"][...] = xp.asarray(hcl)
    if tail:
        dbt = device.to_host(kw["device_buffer_tokens"])
        for rid in range(n):
            dbt[rid, hot:] = seq - 1 - rng.permutation(2 * tail)[:tail]
        kw["device_buffer_tokens"][...] = xp.asarray(dbt)
    for call in range(c["calls"]):
        snap = snapshot(kw)
        tokens = random_selection(rng, snap, batch, steps, top_k, hot, tail, seq) if tail else \
            rng.integers(-2, seq + 2, (batch, steps, top_k))
        lens = seq - rng.integers(0, 3, batch * steps)
        set_selection(kw, tokens, lens, num_real_reqs=int(rng.integers(0, batch + 1)))
        got, want = run_kernel_and_reference(kw, version)
        assert mismatches(got, want) == [], (seed, call, c, version)


@slow_on_gpu
@pytest.mark.parametrize("chunk", range(10))
def test_fuzz_kernel_equals_reference(chunk, spec_version):
    with quick_thread_switches():
        for seed in range(chunk, CONFIGURATIONS, 10):
            fuzz_one(seed, spec_version)
