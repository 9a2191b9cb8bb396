"""Miss-plan replay: byte-exact ragged rows, num_real_reqs bound, skip_io, replay into a second
layer equals the anchor layer, and validation with byte-identical rejection."""

import re

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.single_step.examples import (
    make_swap_in_problem, planned_copy_args, to_device_problem, to_host_problem)
from hisparse_numba.hisparse.single_step.planned_copy import (
    copy_cache_planned_mla, copy_cache_planned_mla_reference)
from hisparse_numba.hisparse.single_step import load_cache_to_device_buffer_mla, versions

from ..conftest import ON_GPU
from .plan_misuse import plan_misuse

COUNTS = [3, 0, 8, 1, 5, 2]        # sglang's test: 6 requests, plan stride 8
N_HOST, N_DEV = 64, 48


def plan_case(rng, item, counts=COUNTS, num_real=None):
    rows, cols = len(counts), 8
    src = np.full((rows, cols), -3, np.int64)
    dst = np.full((rows, cols), -3, np.int32)
    dst_rows = rng.permutation(N_DEV)
    k = 0
    for r, c in enumerate(counts):
        src[r, :c] = rng.choice(N_HOST, size=c, replace=False)
        dst[r, :c] = dst_rows[k:k + c]
        k += c
    return dict(miss_src=src, miss_dst=dst, miss_count=np.array(counts, np.int32),
                num_real_reqs=np.array([rows if num_real is None else num_real], np.int32),
                host_cache=rng.integers(0, 256, N_HOST * item, dtype=np.uint8),
                device_buffer=np.zeros(N_DEV * item, np.uint8), item_size_bytes=item,
                num_blocks=2, block_size=256 if ON_GPU else 64)


def run_kernel(p):
    d = to_device_problem(p)
    copy_cache_planned_mla(**d)
    return device.to_host(d["device_buffer"])


def expected_bytes(p):
    item = p["item_size_bytes"]
    out = p["device_buffer"].copy().reshape(N_DEV, item)
    host = p["host_cache"].reshape(N_HOST, item)
    for r in range(int(p["num_real_reqs"][0])):
        for m in range(p["miss_count"][r]):
            out[p["miss_dst"][r, m]] = host[p["miss_src"][r, m]]
    return out.reshape(-1)


@pytest.mark.parametrize("item", [16, 512, 656, 1152])
def test_replay_is_byte_exact_for_ragged_rows(rng, item):
    p = plan_case(rng, item)
    expected = expected_bytes(p)
    np.testing.assert_array_equal(run_kernel(p), expected)
    copy_cache_planned_mla_reference(**p)
    np.testing.assert_array_equal(p["device_buffer"], expected)


@pytest.mark.parametrize("num_blocks,block_size", [(1, 32), (3, 64), (1, 1024 if ON_GPU else 64)])
def test_every_entry_copied_for_any_grid(rng, num_blocks, block_size):
    """Fewer, equal or more 32-lane groups than entries: each entry still lands."""
    p = plan_case(rng, 48)
    p.update(num_blocks=num_blocks, block_size=block_size)
    np.testing.assert_array_equal(run_kernel(p), expected_bytes(p))


def test_partial_batch_ignores_rows_beyond_num_real_reqs(rng):
    p = plan_case(rng, 32, num_real=3)
    got = run_kernel(p)
    np.testing.assert_array_equal(got, expected_bytes(p))
    live = p["miss_dst"][:3][np.arange(8)[None, :] < p["miss_count"][:3, None]]
    untouched = np.delete(got.reshape(N_DEV, 32), live, axis=0)
    assert not untouched.any()


def test_skip_io_moves_no_bytes(rng):
    p = plan_case(rng, 32)
    p["skip_io"] = True
    assert not run_kernel(p).any()


@pytest.mark.parametrize("version", sorted(versions.VERSIONS))
@pytest.mark.parametrize("K,H,block", [(2048, 4096, 1024)] if ON_GPU else [(8, 16, 32)])
def test_replay_into_second_layer_equals_anchor(K, H, block, version):
    """The anchor layer records a plan (with each rung of the swap-in's ladder); replaying it into a
    lockstep layer gives the same bytes."""
    rng = np.random.default_rng(9)
    p = make_swap_in_problem(rng, batch=4, num_top_k=K, hot_buffer_size=H, block_size=block,
                             num_real=3, fast_rows=1, item_size_bytes=48)
    d = to_device_problem(p)
    layer = device.to_device(p["device_buffer"])   # same starting bytes as the anchor
    load_cache_to_device_buffer_mla(**d, version=version)
    copy_cache_planned_mla(**planned_copy_args(d, layer, num_blocks=2, block_size=64))
    anchor = to_host_problem(d)["device_buffer"]
    assert not np.array_equal(anchor, p["device_buffer"])   # something was copied
    np.testing.assert_array_equal(device.to_host(layer), anchor)


def _bad_dup(p):
    p["miss_dst"][2, 1] = p["miss_dst"][2, 0]


MISUSE = [
    *plan_misuse("miss_dst", "miss_src/miss_dst must have shape [>= num_real_reqs (6), max misses]."),
    ("fewer plan rows than num_real_reqs", lambda p: p.update(miss_src=p["miss_src"][:4], miss_dst=p["miss_dst"][:4]),
     re.escape("miss_src/miss_dst must have shape [>= num_real_reqs (6), max misses].")),
    ("count beyond plan columns", lambda p: p.update(miss_src=p["miss_src"][:, :6], miss_dst=p["miss_dst"][:, :6]),
     re.escape("miss_count[2] = 8 is outside [0, 6]")),
    ("row strides differ", lambda p: p.update(miss_src=p["miss_src"][:, :6], miss_dst=p["miss_dst"][:, :6].copy(),
                                              miss_count=p["miss_count"] * 0),
     re.escape("miss_src/miss_dst row strides must match.")),
    ("num_real_reqs int64", lambda p: p.update(num_real_reqs=p["num_real_reqs"].astype(np.int64)),
     "num_real_reqs must be an int32 array with shape"),
    ("negative entry", lambda p: p["miss_src"].__setitem__((0, 0), -1), "must be >= 0"),
    ("duplicate destination", _bad_dup, "more than once"),
    ("item size 8", lambda p: p.update(item_size_bytes=8), re.escape("The pointers must be multiple of 16 bytes.")),
    ("misaligned device base", lambda p: p.update(device_buffer=p["device_buffer"][8:]),
     re.escape("The pointers must be multiple of 16 bytes.")),
    ("device pool too small", lambda p: p.update(device_buffer=p["device_buffer"][:32 * 4]), "device_buffer holds 128 bytes"),
    ("zero blocks", lambda p: p.update(num_blocks=0), "num_blocks must be >= 1"),
]


@pytest.mark.parametrize("impl", ["reference", "kernel"])
@pytest.mark.parametrize("name,mutate,message", MISUSE, ids=[m[0] for m in MISUSE])
def test_rejected_replay_writes_nothing(rng, impl, name, mutate, message):
    p = plan_case(rng, 32)
    p["device_buffer"][:] = 7
    if impl == "kernel":
        p = {k: (device.to_device(v) if isinstance(v, np.ndarray) else v) for k, v in p.items()}
    mutate(p)
    before = {k: device.to_host(v).tobytes() for k, v in p.items() if hasattr(v, "shape")}
    fn = copy_cache_planned_mla if impl == "kernel" else copy_cache_planned_mla_reference
    with pytest.raises(ValueError, match=message):
        fn(**p)
    assert {k: device.to_host(v).tobytes() for k, v in p.items() if hasattr(v, "shape")} == before


def test_checks_shapes_skips_the_value_pass(rng):
    from hisparse_numba.hisparse.single_step.planned_copy_checks import check_planned_copy
    p = to_device_problem(plan_case(rng, 32))
    p["miss_dst"][0, 0] = 10**6                          # a value only the device pass sees
    assert check_planned_copy(**p, checks="shapes").num_real is None
    with pytest.raises(ValueError, match=re.escape("miss_dst[0, 0] = 1000000")):
        check_planned_copy(**p)


@pytest.mark.parametrize("key,value", [("num_blocks", 2.0), ("item_size_bytes", "32"), ("skip_io", None)])
def test_replay_scalars_are_validated_not_coerced(rng, key, value):
    p = to_device_problem(plan_case(rng, 32))
    with pytest.raises(TypeError, match=key):
        copy_cache_planned_mla(**{**p, key: value})
