"""Single-step swap-in: hand cases (docs/single-step-swap-in.md#worked-examples), kernel vs
reference, state over calls, padded rows, fast path, validation with byte-identical rejection,
sanitizers on a GPU. Every rung of the kernel ladder (``versions.VERSIONS``) runs the cases that
compare a kernel with the reference; validation, shared by the rungs, runs on the default one."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hisparse_numba import device
from hisparse_numba import value_flags
from hisparse_numba.hisparse.single_step.examples import (
    ARRAY_KEYS, copy_problem, make_swap_in_problem, new_queries, planned_copy_args, to_device_problem,
    to_host_problem)
from hisparse_numba.hisparse.single_step.planned_copy import copy_cache_planned_mla
from hisparse_numba.hisparse.single_step import (
    check_swap_in, launch_unchecked, load_cache_to_device_buffer_mla,
    load_cache_to_device_buffer_mla_reference, versions)
from ..conftest import ON_GPU, assert_sanitizer_clean, slow_on_gpu
from .plan_misuse import plan_misuse

VERSIONS = sorted(versions.VERSIONS)
KERNELS = [f"v{n}" for n in VERSIONS]      # a kernel impl names its rung
IMPLS = ["reference"] + KERNELS
HAND_BLOCK = 256 if ON_GPU else 32
# sglang's sizes on the GPU, small ones in the simulator: (K, H, block_size, batch)
SIZES = ([(2048, 4096, bs, 4) for bs in (256, 512, 960, 1024)] if ON_GPU
         else [(8, 16, 32, 3), (5, 12, 64, 2)])


def run(impl, p):
    """Run one implementation ("reference" or a rung "vN") on a NumPy problem; returns the NumPy
    state afterwards."""
    if impl == "reference":
        load_cache_to_device_buffer_mla_reference(**p)
        return p
    d = to_device_problem(p)
    load_cache_to_device_buffer_mla(**d, version=int(impl[1:]))
    return to_host_problem(d)


def assert_same(expected, actual):
    for k in ARRAY_KEYS:
        if expected.get(k) is not None:
            np.testing.assert_array_equal(actual[k], expected[k], err_msg=k)


# ------------------------------------ hand cases (docs/single-step-swap-in.md#worked-examples)
ITEM = 32  # float32 x 8, as sglang's test


def hand_case(queries, seq_lens, *, requests=1, num_real=None, tags=(1, 4, 2, 5, -1),
              locs=(9, 7, 3, 5, 11)):
    """sglang's `_long_case`: H=4, slot rows [9,7,3,5 | newest 11], host_cache_locs = arange(16)."""
    B, K = len(queries), len(queries[0])
    host = np.arange(16 * ITEM, dtype=np.uint8).astype(np.uint8) ^ 0x5A
    p = dict(
        top_k_tokens=np.array(queries, np.int32),
        device_buffer_tokens=np.tile(np.array(tags, np.int32), (requests, 1)),
        host_cache_locs=np.tile(np.arange(16, dtype=np.int64), (requests, 1)),
        device_buffer_locs=np.tile(np.array(locs, np.int32), (requests, 1)),
        host_cache=host, device_buffer=np.zeros(16 * ITEM, np.uint8),
        top_k_device_locs=np.full((B, K), 123456, np.int32),
        req_pool_indices=np.arange(B, dtype=np.int64), seq_lens=np.array(seq_lens, np.int32),
        lru_slots=np.tile(np.arange(4, dtype=np.int16), (requests, 1)), item_size_bytes=ITEM,
        num_top_k=K, hot_buffer_size=4, page_size=1, block_size=HAND_BLOCK,
        num_real_reqs=None if num_real is None else np.array([num_real], np.int32),
        miss_src=np.full((B, K), -7, np.int64), miss_dst=np.full((B, K), -7, np.int32),
        miss_count=np.full(B, -7, np.int32))
    return p


def item(buf, i):
    return buf[i * ITEM:(i + 1) * ITEM]


@pytest.mark.parametrize("impl", IMPLS)
def test_hits_newest_and_updates_lru(impl):
    p = run(impl, hand_case([[4, 2, 7]], [8]))
    assert p["top_k_device_locs"].tolist() == [[7, 3, 11]]
    assert p["device_buffer_tokens"].tolist() == [[1, 4, 2, 5, -1]]
    assert p["lru_slots"].tolist() == [[0, 3, 1, 2]]
    assert p["miss_count"].tolist() == [0]
    assert not p["device_buffer"].any()


@pytest.mark.parametrize("impl", IMPLS)
def test_miss_uses_updated_lru_slot(impl):
    p = run(impl, hand_case([[4, 2, 7]], [8]))
    p["top_k_tokens"] = np.array([[6]], np.int32)
    p["top_k_device_locs"] = np.full((1, 1), 123456, np.int32)
    p["num_top_k"] = 1
    p["miss_src"], p["miss_dst"] = p["miss_src"][:, :1].copy(), p["miss_dst"][:, :1].copy()
    p = run(impl, p)
    assert p["top_k_device_locs"].tolist() == [[9]]
    assert p["device_buffer_tokens"].tolist() == [[6, 4, 2, 5, -1]]
    assert p["lru_slots"].tolist() == [[3, 1, 2, 0]]
    assert (p["miss_count"][0], p["miss_src"][0, 0], p["miss_dst"][0, 0]) == (1, 6, 9)
    np.testing.assert_array_equal(item(p["device_buffer"], 9), item(p["host_cache"], 6))
    others = np.delete(p["device_buffer"].reshape(16, ITEM), 9, axis=0)
    assert not others.any()


@pytest.mark.parametrize("impl", IMPLS)
def test_multiple_misses_copy_all_slots(impl):
    p = run(impl, hand_case([[4, 5, 6, 7]], [9], tags=(0, 1, 2, 3, -1)))
    assert p["top_k_device_locs"].tolist() == [[9, 7, 3, 5]]
    assert p["device_buffer_tokens"].tolist() == [[4, 5, 6, 7, -1]]
    assert p["lru_slots"].tolist() == [[0, 1, 2, 3]]
    assert p["miss_count"].tolist() == [4]
    assert p["miss_src"].tolist() == [[4, 5, 6, 7]] and p["miss_dst"].tolist() == [[9, 7, 3, 5]]
    for tok, row in zip([4, 5, 6, 7], [9, 7, 3, 5]):
        np.testing.assert_array_equal(item(p["device_buffer"], row), item(p["host_cache"], tok))


@pytest.mark.parametrize("impl", IMPLS)
def test_batched_with_padding(impl):
    p = hand_case([[4, 6, 7], [2, 1, 0], [4, 6, 7]], [8, 3, 8], requests=3, num_real=2)
    p["device_buffer_locs"][1] = [12, 10, 8, 6, 14]
    p["device_buffer_tokens"][1] = [0, 1, 2, 3, -1]
    before = copy_problem(p)
    p = run(impl, p)
    assert p["top_k_device_locs"].tolist() == [[7, 9, 11], [8, 10, 12], [-1, -1, -1]]
    assert p["device_buffer_tokens"][0].tolist() == [6, 4, 2, 5, -1]
    assert p["lru_slots"][0].tolist() == [2, 3, 0, 1]
    for r in (1, 2):  # fast path and padded row: state untouched
        assert p["device_buffer_tokens"][r].tolist() == before["device_buffer_tokens"][r].tolist()
        assert p["lru_slots"][r].tolist() == before["lru_slots"][r].tolist()
    assert p["miss_count"].tolist() == [1, 0, -7]   # the padded row's count stays stale


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seq_dtype", [np.int32, np.int64])
def test_fast_path(impl, seq_dtype):
    p = hand_case([[2, 0, 1]], [3], locs=(13, 9, 5, 1, 11))
    p["seq_lens"] = p["seq_lens"].astype(seq_dtype)
    before = copy_problem(p)
    p = run(impl, p)
    assert p["top_k_device_locs"].tolist() == [[5, 13, 9]]
    for k in ("device_buffer_tokens", "lru_slots", "device_buffer"):
        np.testing.assert_array_equal(p[k], before[k])
    assert p["miss_count"].tolist() == [0]


@pytest.mark.parametrize("impl", IMPLS)
def test_fast_path_overwrites_stale_output(impl):
    p = run(impl, hand_case([[1, -1, 0, 0]], [2], locs=(3, 7, 5, 1, 11)))
    assert p["top_k_device_locs"].tolist() == [[7, -1, -1, -1]]


@pytest.mark.parametrize("impl", ["reference"] + (KERNELS if ON_GPU else []))
def test_large_lru_writeback(impl):
    K, H, seq_len = 2048, 4096, 7299
    query = np.concatenate([np.arange(1000, 2000), np.arange(5000, 6048)]).astype(np.int32)
    p = dict(top_k_tokens=query[None, :], device_buffer_tokens=np.append(np.arange(H), -1)[None, :].astype(np.int32),
             host_cache_locs=np.arange(seq_len, dtype=np.int64)[None, :],
             device_buffer_locs=np.arange(H + 1, dtype=np.int32)[None, :],
             host_cache=np.zeros(seq_len * 16, np.uint8), device_buffer=np.zeros((H + 1) * 16, np.uint8),
             top_k_device_locs=np.zeros((1, K), np.int32), req_pool_indices=np.zeros(1, np.int32),
             seq_lens=np.array([seq_len], np.int32), lru_slots=np.arange(H, dtype=np.int16)[None, :],
             item_size_bytes=16, num_top_k=K, hot_buffer_size=H, block_size=1024)
    p = run(impl, p)
    expected = np.concatenate([np.arange(2048, 4096), np.arange(0, 1000), np.arange(2000, 2048),
                               np.arange(1000, 2000)])
    np.testing.assert_array_equal(p["lru_slots"][0], expected)


# ---------------------------------------------------------------- kernel vs reference
def check_against_reference(p, version):
    expected = copy_problem(p)
    load_cache_to_device_buffer_mla_reference(**expected)
    assert_same(expected, run(f"v{version}", p))
    return expected


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("K,H,block,batch", SIZES)
def test_random_problem_matches_reference(K, H, block, batch, version):
    rng = np.random.default_rng(K * 7 + block)
    p = make_swap_in_problem(rng, batch=batch, num_top_k=K, hot_buffer_size=H, block_size=block,
                             item_size_bytes=64 if ON_GPU else 32, num_real=batch - 1, fast_rows=1)
    check_against_reference(p, version)


@pytest.mark.parametrize("version", VERSIONS)
@slow_on_gpu(seconds=120)   # about 2 min on the H200: hypothesis' examples reach new specialisations
@settings(max_examples=10 if not ON_GPU else 25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), batch=st.integers(1, 3), K=st.integers(1, 9),
       extra_h=st.integers(0, 9), block=st.sampled_from([32, 64]), record=st.booleans(),
       item=st.sampled_from([16, 48]), page=st.integers(1, 3), idx64=st.booleans(),
       hit=st.floats(0, 1), resident=st.floats(0, 1))
def test_hypothesis_kernel_equals_reference(seed, batch, K, extra_h, block, record, item, page,
                                            idx64, hit, resident, version):
    rng = np.random.default_rng(seed)
    num_real = int(rng.integers(0, batch + 1))
    p = make_swap_in_problem(rng, batch=batch, num_top_k=K, hot_buffer_size=K + extra_h,
                             block_size=block, record_plan=record, item_size_bytes=item,
                             page_size=page, num_real=num_real,
                             fast_rows=int(rng.integers(0, num_real + 1)),
                             index_dtype=np.int64 if idx64 else np.int32,
                             hit_fraction=hit, resident_fraction=resident)
    check_against_reference(p, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("K,H,block,batch", SIZES[:1] + SIZES[-1:])
def test_state_carries_over_calls(K, H, block, batch, version):
    """Several decode steps in sequence: each step's tags/LRU feed the next."""
    rng = np.random.default_rng(3)
    p = make_swap_in_problem(rng, batch=batch, num_top_k=K, hot_buffer_size=H, block_size=block,
                             fast_rows=0, hit_fraction=0.7)
    d = to_device_problem(p)
    for step in range(3):
        load_cache_to_device_buffer_mla_reference(**p)
        load_cache_to_device_buffer_mla(**d, version=version)
        assert_same(p, to_host_problem(d))
        new_queries(rng, p, hit_fraction=0.7, grow=True)
        for k in ("top_k_tokens", "seq_lens", "host_cache_locs"):
            d[k] = device.to_device(p[k])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("K,H,block,batch", SIZES[:1])
def test_skip_io_plans_without_moving_bytes_then_replay(K, H, block, batch, version):
    rng = np.random.default_rng(5)
    p = make_swap_in_problem(rng, batch=batch, num_top_k=K, hot_buffer_size=H, block_size=block)
    expected = copy_problem(p)
    load_cache_to_device_buffer_mla_reference(**expected)
    d = to_device_problem(p)
    d["skip_io"] = True
    load_cache_to_device_buffer_mla(**d, version=version)
    got = to_host_problem(d)
    np.testing.assert_array_equal(got["device_buffer"], p["device_buffer"])
    got["device_buffer"] = expected["device_buffer"]
    assert_same(expected, got)
    copy_cache_planned_mla(miss_src=d["miss_src"], miss_dst=d["miss_dst"], miss_count=d["miss_count"],
                           num_real_reqs=d["num_real_reqs"], host_cache=d["host_cache"],
                           device_buffer=d["device_buffer"], item_size_bytes=d["item_size_bytes"],
                           num_blocks=2, block_size=64)
    np.testing.assert_array_equal(device.to_host(d["device_buffer"]), expected["device_buffer"])


# ---------------------------------------------------------------- validation
def _missed_position(p, b=0):
    """A position row b (long path) will miss: selected, not resident, not the newest."""
    r = int(p["req_pool_indices"][b])
    tags = device.to_host(p["device_buffer_tokens"])[r, :p["hot_buffer_size"]]
    t = device.to_host(p["top_k_tokens"])[b]
    newest = int(device.to_host(p["seq_lens"])[b]) - 1
    missed = [x for x in t if x != newest and x not in tags]
    return r, int(missed[0])


def _wide(a, extra, cols):
    mod = np if isinstance(a, np.ndarray) else device.xp
    w = mod.zeros((a.shape[0], a.shape[1] + extra), a.dtype)
    w[:, :a.shape[1]] = a
    return w[:, :cols]


def _set(p, key, index, value):
    p[key][index] = value


MISUSE = [
    ("hot buffer smaller than top_k", lambda p: p.update(hot_buffer_size=7),
     re.escape("hot_buffer_size (7) must be >= num_top_k (8)")),
    *plan_misuse("miss_count", "miss_src/miss_dst must have shape [batch, >= top_k] (capacity 8)."),
    ("plan too narrow", lambda p: p.update(miss_src=p["miss_src"][:, :4], miss_dst=p["miss_dst"][:, :4]),
     re.escape("miss_src/miss_dst must have shape [batch, >= top_k] (capacity 8).")),
    ("miss_count too short", lambda p: p.update(miss_count=p["miss_count"][:2]),
     re.escape("miss_count must have shape [batch].")),
    ("plan row strides differ", lambda p: p.update(miss_src=_wide(p["miss_src"], 8, 8)),
     re.escape("miss_src/miss_dst row strides must match.")),
    ("num_top_k != top_k_tokens.shape[1]", lambda p: p.update(top_k_tokens=_wide(p["top_k_tokens"], 2, 10)),
     re.escape("num_top_k (8) must match top_k_tokens.shape[1] (10)")),
    ("top_k_tokens int64", lambda p: p.update(top_k_tokens=p["top_k_tokens"].astype(np.int64)),
     "top_k_tokens must have dtype int32"),
    ("lru_slots int32", lambda p: p.update(lru_slots=p["lru_slots"].astype(np.int32)),
     "lru_slots must have dtype int16"),
    ("host_cache_locs view", lambda p: p.update(host_cache_locs=_wide(p["host_cache_locs"], 4, p["host_cache_locs"].shape[1])),
     "host_cache_locs must be C-contiguous"),
    ("tags/locs strides differ", lambda p: p.update(device_buffer_locs=_wide(p["device_buffer_locs"], 3, 17)),
     r"device_buffer_locs row stride \(20 elements\) must equal device_buffer_tokens row stride \(17"),
    ("-1 in a long-path row", lambda p: _set(p, "top_k_tokens", (0, 3), -1), r"outside \[0, seq_len\)"),
    ("duplicate position", lambda p: _set(p, "top_k_tokens", (0, 1), int(device.to_host(p["top_k_tokens"])[0, 0])),
     "duplicate positions"),
    ("miss without host backup", lambda p: _set(p, "host_cache_locs", _missed_position(p), -1), "no host backup"),
    ("lru not a permutation", lambda p: _set(p, "lru_slots", (int(device.to_host(p["req_pool_indices"])[0]), 0),
                                             int(device.to_host(p["lru_slots"])[int(device.to_host(p["req_pool_indices"])[0]), 1])),
     "is not a permutation"),
    ("item size 24", lambda p: p.update(item_size_bytes=24), re.escape("The pointers must be multiple of 16 bytes.")),
    ("device base misaligned", lambda p: p.update(device_buffer=p["device_buffer"][8:]),
     re.escape("The pointers must be multiple of 16 bytes.")),
    ("host base misaligned", lambda p: p.update(host_cache=p["host_cache"][8:]),
     re.escape("The pointers must be multiple of 16 bytes.")),
    ("block size 48", lambda p: p.update(block_size=48), "block_size must be a multiple of 32"),
    ("shared request row", lambda p: _set(p, "req_pool_indices", 1, int(device.to_host(p["req_pool_indices"])[0])),
     "must own"),
    ("fast-path position past seq_len", lambda p: _set(p, "top_k_tokens", (2, 0), 10**6), "fast path"),
    ("num_real_reqs > batch", lambda p: p.update(num_real_reqs=p["num_real_reqs"] + 5), r"num_real_reqs\[0\] = 8"),
    ("host pool too small", lambda p: p.update(host_cache=p["host_cache"][:64]), "host_cache (holds 64 bytes|is a view)"),
    ("request row out of range", lambda p: _set(p, "req_pool_indices", 0, 99), r"req_pool_indices\[0\] = 99"),
]


def snapshot(p):
    return {k: device.to_host(v).tobytes() for k, v in p.items() if k in ARRAY_KEYS and v is not None}


@pytest.mark.parametrize("impl", ["reference", "kernel"])
@pytest.mark.parametrize("name,mutate,message", MISUSE, ids=[m[0] for m in MISUSE])
def test_rejected_call_writes_nothing(impl, name, mutate, message):
    rng = np.random.default_rng(11)
    p = make_swap_in_problem(rng, batch=3, num_top_k=8, hot_buffer_size=16, num_real=3, fast_rows=1)
    if impl == "kernel":
        p = to_device_problem(p)
    mutate(p)
    before = snapshot(p)
    fn = load_cache_to_device_buffer_mla if impl == "kernel" else load_cache_to_device_buffer_mla_reference
    with pytest.raises(ValueError, match=message):
        fn(**p)
    assert snapshot(p) == before


# ---------------------------------------------------------------- sanitizers (GPU only)
SANITIZER_SCRIPT = """
import numpy as np
from hisparse_numba import device
from hisparse_numba.hisparse.single_step.examples import make_swap_in_problem, to_device_problem, planned_copy_args
from hisparse_numba.hisparse.single_step import load_cache_to_device_buffer_mla
from hisparse_numba.hisparse.single_step.planned_copy import copy_cache_planned_mla
rng = np.random.default_rng(0)
for bs in (256, 960, 1024):
    p = make_swap_in_problem(rng, batch=3, num_top_k=2048, hot_buffer_size=4096, block_size=bs,
                             item_size_bytes=64, num_real=2, fast_rows=1)
    d = to_device_problem(p)
    load_cache_to_device_buffer_mla(**d)
    copy_cache_planned_mla(**planned_copy_args(d, device.to_device(p["device_buffer"]),
                                               num_blocks=4, block_size=1024))
device.synchronize()
print("done")
"""


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer(tool):
    assert_sanitizer_clean(tool, SANITIZER_SCRIPT)

# ---------------------------------------------------------------- scalars, checks= and races
@pytest.mark.parametrize("key,value", [("num_top_k", 8.0), ("hot_buffer_size", 16.5), ("item_size_bytes", "32"),
                                       ("block_size", None), ("page_size", float("inf")),
                                       ("item_size_bytes", True), ("skip_io", "no")])
def test_scalars_are_validated_not_coerced(key, value):
    p = to_device_problem(make_swap_in_problem(np.random.default_rng(3), batch=3, num_top_k=8, hot_buffer_size=16))
    before = snapshot(p)
    with pytest.raises(TypeError, match=key):
        load_cache_to_device_buffer_mla(**{**p, key: value})
    assert snapshot(p) == before


def test_numpy_integers_are_fine():
    p = make_swap_in_problem(np.random.default_rng(3), batch=3, num_top_k=8, hot_buffer_size=16, block_size=32)
    expected = copy_problem(p)
    load_cache_to_device_buffer_mla_reference(**expected)
    d = to_device_problem(p)
    load_cache_to_device_buffer_mla(**{**d, "num_top_k": np.int64(8), "hot_buffer_size": np.int32(16)})
    assert_same(expected, to_host_problem(d))


def test_hot_slots_sharing_a_device_row_are_rejected():
    """Two hot slots with one device row: two misses copied into it would race (issue 18, item 4)."""
    p = make_swap_in_problem(np.random.default_rng(4), batch=2, num_top_k=8, hot_buffer_size=16, fast_rows=0)
    rid = int(p["req_pool_indices"][0])
    p["device_buffer_locs"][rid, 3] = p["device_buffer_locs"][rid, 2]
    for impl in IMPLS:
        q = to_device_problem(p) if impl == "kernel" else copy_problem(p)
        before = snapshot(q)
        fn = load_cache_to_device_buffer_mla if impl == "kernel" else load_cache_to_device_buffer_mla_reference
        with pytest.raises(ValueError, match=r"are both device row"):
            fn(**q)
        assert snapshot(q) == before


def test_checks_shapes_skips_the_value_pass_and_full_is_the_default():
    from hisparse_numba.hisparse.single_step.checks import check_swap_in
    p = to_device_problem(make_swap_in_problem(np.random.default_rng(5), batch=3, num_top_k=8, hot_buffer_size=16))
    p["req_pool_indices"][0] = 99                       # a value only the device pass sees
    assert check_swap_in(**p, checks="shapes").num_real is None
    with pytest.raises(ValueError, match=r"req_pool_indices\[0\] = 99"):
        check_swap_in(**p)
    with pytest.raises(ValueError, match="checks must be"):
        check_swap_in(**p, checks="none")


def test_an_accepted_call_checks_values_in_one_pass_without_host_copies(monkeypatch):
    """One check-kernel launch with one read-back (value_flags.check_flags), no table copied to the host."""
    p = to_device_problem(make_swap_in_problem(np.random.default_rng(6), batch=3, num_top_k=8, hot_buffer_size=16,
                                               num_real=2, block_size=32))
    calls = {"start_check": 0, "to_host": 0}
    start_check, to_host = value_flags.start_check, device.to_host

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(value_flags, "start_check", counting("start_check", start_check))
    monkeypatch.setattr(device, "to_host", counting("to_host", to_host))
    load_cache_to_device_buffer_mla(**p)
    d = planned_copy_args(p, device.to_device(np.zeros(p["device_buffer"].shape, np.uint8)))
    copy_cache_planned_mla(**d)
    assert calls == {"start_check": 2, "to_host": 0}


@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU (the argument list is the GPU launch path's)")
def test_a_decode_loop_reuses_the_check_kernels_argument_list():
    """The claim epoch lives in the flags (value_flags.EPOCH_WORD, advanced by each check), not in
    an argument, so the check kernel of a repeated call on the same buffers launches with its
    previous argument list, and the second call still sees its own epoch (no false "shared
    device row")."""
    from hisparse_numba.hisparse.single_step.value_checks import CHECK_BLOCK, swap_in_check_kernel

    p = to_device_problem(make_swap_in_problem(np.random.default_rng(7), batch=3, num_top_k=8, hot_buffer_size=16,
                                               num_real=3, block_size=32))
    load_cache_to_device_buffer_mla(**p)
    kernel = swap_in_check_kernel(8, 16)
    first = device._last_launch[kernel].kargs
    load_cache_to_device_buffer_mla(**p)
    assert device._last_launch[kernel].kargs is first and device._last_launch[kernel].grid == 3
    assert CHECK_BLOCK == device._last_launch[kernel].block


# ---------------------------------------------------------------- the version argument
@pytest.mark.parametrize("version,error,message", [
    (True, TypeError, "version must be an int or None, got bool"),
    ("2", TypeError, "version must be an int or None, got str"),
    (2.0, TypeError, "version must be an int or None, got float"),
    (0, ValueError, r"version must be one of \[1, 2\], got 0"),
    (99, ValueError, r"version must be one of \[1, 2\], got 99")])
def test_a_bad_version_is_rejected_before_anything_is_written(version, error, message):
    p = to_device_problem(make_swap_in_problem(np.random.default_rng(2), batch=2, num_top_k=8,
                                               hot_buffer_size=16, block_size=32))
    before = snapshot(p)
    with pytest.raises(error, match=message):
        load_cache_to_device_buffer_mla(**p, version=version)
    with pytest.raises(error, match=message):
        launch_unchecked(check_swap_in(**p), version=version)
    assert snapshot(p) == before


def test_a_rung_whose_shared_memory_passes_48_kib_is_rejected_before_anything_is_written():
    """v1 keeps the old LRU order in shared memory: 3 bytes per hot slot, past 48 KiB at K=2048
    beyond H=7508. The GPU compiler would refuse the kernel; the launcher says so first."""
    assert versions.module(1).shared_memory_bytes(2048, 4096, 1024) <= 48 * 1024
    assert versions.module(2).shared_memory_bytes(2048, 4096, 1024) <= 48 * 1024
    p = to_device_problem(make_swap_in_problem(np.random.default_rng(2), batch=2, num_top_k=8,
                                               hot_buffer_size=16, block_size=32))
    call = check_swap_in(**p)._replace(num_top_k=2048, hot_buffer_size=8192)
    before = snapshot(p)
    with pytest.raises(ValueError, match=r"version 1 needs 51204 bytes of static shared memory .* "
                                         r"the limit is 49152 \(48 KiB\)"):
        launch_unchecked(call, version=1)
    assert snapshot(p) == before


def test_every_rung_names_its_step_in_its_docstring():
    for number, v in versions.VERSIONS.items():
        assert v.number == number
        doc = versions.module(number).__doc__
        assert doc.splitlines()[0] == v.why, v.name
        assert callable(versions.module(number).swap_in_kernel)
    assert versions.check_version(None) == versions.DEFAULT == max(versions.VERSIONS)
    assert versions.check_version(np.int64(1)) == 1
