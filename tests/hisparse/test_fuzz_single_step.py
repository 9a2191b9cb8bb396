"""Random differential fuzz of the single-step family against its NumPy references.

Each configuration is drawn from its own seed (``SEED + i``), so a failure names a seed that
reproduces it alone: ``pytest tests/hisparse/test_fuzz_single_step.py -k "seed_1234"`` is not needed,
``run_config(1234)`` is. ``FUZZ_CONFIGS`` valid configurations (1,000 on a GPU, a few in the
simulator; ``HISPARSE_NUMBA_FUZZ_CONFIGS`` overrides) each run two decode steps of the swap-in
(the second on the state the first left), the replay of the recorded plan into a second layer and a
gather, and compare every output and state array byte for byte. Sizes come from a few (K, H) pairs
so that the GPU compiles a bounded number of kernel specialisations, which ``warmup --tests``
compiles beforehand (``single_step_workloads.py``).

The value checks are fuzzed too: random corruptions of valid calls, each judged by the check kernel
and by its NumPy verdict, which must agree on every condition's count and first row.
"""

import os

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.single_step import planned_copy_checks as pc
from hisparse_numba.hisparse.single_step import versions
from hisparse_numba.hisparse.single_step import checks as sc
from hisparse_numba.hisparse.single_step import value_checks as sv
from hisparse_numba.hisparse.single_step.examples import (ARRAY_KEYS, copy_problem, make_swap_in_problem, new_queries,
                                              planned_copy_args, to_device_problem, to_host_problem)
from hisparse_numba.hisparse.gather import gather_to_hot_buffer, gather_to_hot_buffer_reference
from hisparse_numba.hisparse.gather_checks import gather_flags_reference, gather_value_flags
from hisparse_numba.hisparse.single_step.planned_copy import copy_cache_planned_mla, copy_cache_planned_mla_reference
from hisparse_numba.hisparse.single_step import (load_cache_to_device_buffer_mla,
                                             load_cache_to_device_buffer_mla_reference)

from ..conftest import ON_GPU, slow_on_gpu
from hisparse_numba.hisparse.single_step.workloads import BLOCKS, SIZES

SEED = 20261130
FUZZ_CONFIGS = int(os.environ.get("HISPARSE_NUMBA_FUZZ_CONFIGS", 1000 if ON_GPU else 6))
CHECK_CASES = 200 if ON_GPU else 24
LOWER_RUNGS = [n for n in sorted(versions.VERSIONS) if n != versions.DEFAULT]
LOWER_RUNG_CONFIGS = FUZZ_CONFIGS // 4 if ON_GPU else FUZZ_CONFIGS


def draw_problem(rng):
    K, H = SIZES[rng.integers(len(SIZES))]
    # Large batches with small K, small batches with sglang's K: the host-side builder and the
    # reference stay cheap, so 1,000 configurations fit the GPU suite's budget.
    batch = int(rng.integers(1, (65 if K <= 64 else 9) if ON_GPU else 4))
    num_real = int(rng.integers(0, batch + 1))
    return make_swap_in_problem(
        rng, batch=batch, num_top_k=K, hot_buffer_size=H, item_size_bytes=16 * int(rng.integers(1, 5)),
        num_requests=batch + int(rng.integers(0, 3)), max_extra=int(rng.integers(1, 2 * H)),
        fast_rows=int(rng.integers(0, num_real + 1)), num_real=num_real,
        record_plan=bool(rng.integers(2)), resident_fraction=float(rng.uniform(0, 1)),
        hit_fraction=float(rng.uniform(0, 1)), newest_probability=float(rng.uniform(0, 1)),
        unbacked_fraction=float(rng.uniform(0, 0.5)),
        index_dtype=(np.int32, np.int64)[rng.integers(2)], block_size=int(rng.choice(BLOCKS)))


def assert_same(expected, got, what):
    for k in ARRAY_KEYS:
        if expected.get(k) is not None:
            assert got[k].dtype == expected[k].dtype and got[k].tobytes() == expected[k].tobytes(), \
                f"{what}: {k} differs from the reference"


def swap_in_steps(rng, seed: int, version=None) -> dict:
    """Two swap-in steps of rung ``version`` (None: the default) of one drawn configuration, each
    equal to the reference on every array; the NumPy state afterwards."""
    problem = draw_problem(rng)
    problem["skip_io"] = bool(rng.random() < 0.2)
    d = to_device_problem(problem)
    for step in range(2):
        if step:
            new_queries(rng, problem, grow=True)
            d = to_device_problem(problem)
        load_cache_to_device_buffer_mla(**d, version=version)
        load_cache_to_device_buffer_mla_reference(**problem)
        assert_same(problem, to_host_problem(d), f"seed {seed}, version {version}, swap-in step {step}")
        problem = to_host_problem(d)
    return problem


def run_config(seed: int) -> None:
    rng = np.random.default_rng(seed)
    problem = swap_in_steps(rng, seed)

    if problem["miss_src"] is not None:
        layer = rng.integers(0, 256, problem["device_buffer"].size, dtype=np.uint8)
        args = planned_copy_args(problem, layer.copy(), num_blocks=int(rng.integers(1, 5)),
                                 block_size=int(rng.choice(BLOCKS)), skip_io=bool(rng.random() < 0.2))
        expected = dict(args, device_buffer=layer.copy())
        copy_cache_planned_mla_reference(**expected)
        got = to_device_problem(args)
        copy_cache_planned_mla(**got)
        assert device.to_host(got["device_buffer"]).tobytes() == expected["device_buffer"].tobytes(), \
            f"seed {seed}: replay differs from the reference"

    item = 16 * int(rng.integers(1, 5))
    n_host, n_dev = int(rng.integers(1, 64)), int(rng.integers(1, 64))
    n = int(rng.integers(0, min(n_host, n_dev) + 1))
    g = dict(host_cache=rng.integers(0, 256, n_host * item, dtype=np.uint8),
             device_buffer=rng.integers(0, 256, n_dev * item, dtype=np.uint8),
             src_locs=rng.integers(0, n_host, n).astype(np.int64),
             dst_locs=rng.permutation(n_dev)[:n].astype(np.int64), item_size_bytes=item)
    got = to_device_problem(g)
    gather_to_hot_buffer(**got)
    gather_to_hot_buffer_reference(**g)
    assert device.to_host(got["device_buffer"]).tobytes() == g["device_buffer"].tobytes(), \
        f"seed {seed}: gather differs from the reference"


@slow_on_gpu
@pytest.mark.parametrize("chunk", range(4))
def test_random_valid_configurations_equal_the_reference(chunk):
    for i in range(chunk, FUZZ_CONFIGS, 4):
        run_config(SEED + i)


@slow_on_gpu
@pytest.mark.parametrize("version", LOWER_RUNGS)
@pytest.mark.parametrize("chunk", range(2))
def test_every_lower_rung_equals_the_reference_on_the_fuzz(version, chunk):
    """The ladder's lower rungs on the fuzz's swap-in steps (the replay and the gather after them
    do not depend on the rung)."""
    for i in range(chunk, LOWER_RUNG_CONFIGS, 2):
        swap_in_steps(np.random.default_rng(SEED + i), SEED + i, version)


@pytest.mark.slow
def test_warmup_covers_the_fuzz():
    """Every kernel specialisation the fuzz launches is one ``warmup --tests`` compiles, so the
    GPU's fuzz loads its kernels from the cache instead of compiling about 80 of them."""
    from hisparse_numba import warmup

    tasks = [t for t in warmup.tasks_for("tests")
             if t.function in ("compile_fuzz_configurations", "compile_gather")]
    compiled, fuzzed = set(), set()
    with warmup.recording_launches(compiled):
        for task in tasks:
            task.run()
    with warmup.recording_launches(fuzzed):
        for i in range(40 if ON_GPU else 6):
            run_config(SEED + i)
            for version in LOWER_RUNGS:
                swap_in_steps(np.random.default_rng(SEED + i), SEED + i, version)
    assert fuzzed and not fuzzed - compiled, sorted(fuzzed - compiled)


# ------------------------------------------------------- the value checks against their verdicts
def corrupt(rng, p):
    """One random corruption of a valid problem (or none), in place."""
    K, H = p["num_top_k"], p["hot_buffer_size"]
    b = int(rng.integers(p["top_k_tokens"].shape[0]))
    rid = int(p["req_pool_indices"][b])
    kind = int(rng.integers(9))
    if kind == 0:
        p["top_k_tokens"][b, rng.integers(K)] = rng.choice([-1, int(p["seq_lens"][b]), 10**6])
    elif kind == 1 and K > 1:
        p["top_k_tokens"][b, 1] = p["top_k_tokens"][b, 0]
    elif kind == 2:
        p["lru_slots"][rid, rng.integers(H)] = rng.choice([-1, 0, H])
    elif kind == 3:
        p["device_buffer_tokens"][rid, rng.integers(H)] = p["top_k_tokens"][b, rng.integers(K)]
    elif kind == 4:
        p["host_cache_locs"][rid, rng.integers(p["host_cache_locs"].shape[1])] = rng.choice([-1, 10**7])
    elif kind == 5:
        p["device_buffer_locs"][rid, rng.integers(H)] = rng.choice([-1, 10**7, int(p["device_buffer_locs"][rid, 0])])
    elif kind == 6:
        p["req_pool_indices"][b] = rng.choice([-1, p["device_buffer_tokens"].shape[0], p["req_pool_indices"][0]])
    elif kind == 7:
        p["seq_lens"][b] = rng.choice([-1, 0, 2**31 - 1])
    else:
        p["num_real_reqs"][0] = rng.choice([-1, p["top_k_tokens"].shape[0] + 1, 0])


def same_verdict(got, want, unordered=()):
    """Counts agree everywhere; first rows too, except for conditions whose first row is whichever
    claim came second on the device."""
    for c, (g, w) in enumerate(zip(got, want)):
        assert g[0] == w[0], f"condition {c}: count {g} != reference {w}"
        if c not in unordered:
            assert g[1] == w[1], f"condition {c}: first row {g} != reference {w}"


@pytest.mark.parametrize("case", range(CHECK_CASES))
def test_swap_in_check_kernel_agrees_with_its_verdict(case):
    rng = np.random.default_rng(SEED + 7919 * case)
    p = draw_problem(rng)
    for _ in range(int(rng.integers(1, 4))):
        corrupt(rng, p)
    if p["top_k_tokens"].shape[0] == 0:
        return
    want = sv.swap_in_flags_reference(sc.check_swap_in(**p, checks="shapes"))
    got = sc.start_swap_in_check(sc.check_swap_in(**to_device_problem(p), checks="shapes")).verdict()
    same_verdict(got, want, unordered=(sc.HOT_LOCATION,))


@pytest.mark.parametrize("case", range(CHECK_CASES // 2))
def test_replay_and_gather_check_kernels_agree_with_their_verdicts(case):
    rng = np.random.default_rng(SEED + 104729 * case)
    rows, cols, item, n_host, n_dev = 4, 6, 32, 40, 30
    counts = rng.integers(-1, cols + 2, rows).astype(np.int32)
    src = rng.integers(-1, n_host + 2, (rows, cols))
    dst = rng.integers(-1, n_dev + 2, (rows, cols)).astype(np.int32)
    args = dict(miss_src=src, miss_dst=dst, miss_count=counts,
                num_real_reqs=np.array([rng.integers(-1, rows + 2)], np.int32),
                host_cache=np.zeros(n_host * item, np.uint8), device_buffer=np.zeros(n_dev * item, np.uint8),
                item_size_bytes=item, num_blocks=1, block_size=32)
    want = pc.planned_copy_flags_reference(pc.check_planned_copy(**args, checks="shapes"))
    got = pc.start_planned_copy_check(pc.check_planned_copy(**to_device_problem(args), checks="shapes")).verdict()
    same_verdict(got, want, unordered=(pc.DESTINATION,))

    locs = rng.integers(-1, n_dev + 1, (2, 12))
    want = gather_flags_reference(locs[0], locs[1], n_host, n_dev)
    got = gather_value_flags(device.to_device(locs[0]), device.to_device(locs[1]), n_host, n_dev)
    same_verdict(got, want, unordered=(2,))


def test_a_valid_call_with_a_huge_seq_len_runs():
    """Validation memory does not grow with values: seq_len = 2**31 - 1 is checked and served."""
    rng = np.random.default_rng(SEED)
    p = make_swap_in_problem(rng, batch=1, num_top_k=4, hot_buffer_size=8, fast_rows=0,
                             index_dtype=np.int64, block_size=32)
    newest = 2**31 - 2
    p["seq_lens"][0] = newest + 1
    rid = int(p["req_pool_indices"][0])
    tags = p["device_buffer_tokens"][rid, :8]
    resident = tags[tags >= 0][:2]
    backed = np.setdiff1d(np.flatnonzero(p["host_cache_locs"][rid] >= 0), tags)[:3 - resident.size]
    p["top_k_tokens"][0] = np.concatenate([[newest], resident, backed]).astype(np.int32)
    expected = copy_problem(p)
    load_cache_to_device_buffer_mla_reference(**expected)
    d = to_device_problem(p)
    load_cache_to_device_buffer_mla(**d)
    assert_same(expected, to_host_problem(d), "huge seq_len")
