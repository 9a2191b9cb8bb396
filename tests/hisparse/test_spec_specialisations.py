"""Calls of different sizes share compiled kernels: steps, top_k and H are runtime values.

On a GPU each compile-time configuration of the speculative swap kernel costs about 40 s to
compile, so the sizes of a call must not be part of the kernel's key (docs/speculative-swap-in.md,
"Compiled kernels").
"""

import numpy as np

from hisparse_numba.hisparse.speculative import state as spec_state
from hisparse_numba.hisparse.speculative.examples import (make_spec_problem, mismatches,
                                                   run_kernel_and_reference, set_selection)
from hisparse_numba.hisparse.speculative import v3_tuned

# (steps, top_k, H): one tile per request on every backend, so the key is the same for all three
SIZES = ((2, 16, 16), (3, 10, 24), (4, 8, 32))
TAIL, SEQ = 4, 200


def recording(monkeypatch, module, name):
    """Replace ``module.name`` by a wrapper that records the arguments of every call."""
    real = getattr(module, name)
    keys = []

    def wrapper(*args):
        keys.append(args)
        return real(*args)
    monkeypatch.setattr(module, name, wrapper)
    return keys


def test_three_sizes_use_one_swap_kernel_and_one_initialiser(monkeypatch):
    swap_keys = recording(monkeypatch, v3_tuned, "swap_kernel")
    init_keys = recording(monkeypatch, spec_state, "_init_kernel")
    rng = np.random.default_rng(15)
    for steps, top_k, hot in SIZES:
        kw = make_spec_problem(batch=2, steps=steps, top_k=top_k, hot=hot, tail=TAIL,
                               num_requests=3, max_positions=256)
        for _ in range(2):      # the second call starts from the state the first one left
            tokens = rng.integers(-1, 2 * hot + 20, size=(2, steps, top_k))
            tokens[:, 1:, : top_k // 2] = tokens[:, :1, : top_k // 2]     # repeats across steps
            set_selection(kw, tokens, np.full(2 * steps, SEQ))
            got, want = run_kernel_and_reference(kw)
            assert mismatches(got, want) == [], (steps, top_k, hot)
    assert len(swap_keys) == 2 * len(SIZES) and len(set(swap_keys)) == 1, swap_keys
    assert len(init_keys) == len(SIZES) and set(init_keys) == {(32,)}, init_keys


def test_the_initialiser_rounds_its_slot_lists_up_to_a_power_of_two():
    assert [spec_state.init_slot_capacity(h) for h in (2, 32, 33, 4096, 5000, 8192)] == \
        [32, 32, 64, 4096, 8192, 8192]
    # above 8192 the rounded lists would not fit 48 KiB of static shared memory: H itself
    assert spec_state.init_slot_capacity(9000) == 9000


def test_three_sizes_and_both_plan_modes_share_one_plain_kernel_specialisation():
    """Version 1 has no compile-time configuration at all: sizes and ``record`` are runtime."""
    from hisparse_numba.warmup import recording_launches

    seen = set()
    rng = np.random.default_rng(16)
    with recording_launches(seen):
        for (steps, top_k, hot), record in zip(SIZES, (False, True, False)):
            kw = make_spec_problem(batch=2, steps=steps, top_k=top_k, hot=hot, tail=TAIL,
                                   num_requests=3, max_positions=256, record=record)
            tokens = rng.integers(-1, 2 * hot + 20, size=(2, steps, top_k))
            set_selection(kw, tokens, np.full(2 * steps, SEQ))
            got, want = run_kernel_and_reference(kw, version=1)
            assert mismatches(got, want) == [], (steps, top_k, hot)
    assert len({k for k in seen if "plain_kernel" in k}) == 1, seen
