"""The hash chain: pinned vectors, host == device, constants."""

import numpy as np

from hisparse_numba import device
from hisparse_numba.device import cuda
from hisparse_numba.kv_canary.hashing import (
    CANARY_CHAIN_ANCHOR,
    CHAIN_HEAD_HASH,
    CanaryLaunchTag,
    FailReason,
    RealKvHashMode,
    as_int64_dev,
    chain_hashes,
    mix3,
    mix3_dev,
    splitmix64,
    splitmix64_dev,
)


def test_pinned_vectors():
    assert splitmix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF
    assert CANARY_CHAIN_ANCHOR == 0xC0FFEE1234567890
    assert splitmix64(CANARY_CHAIN_ANCHOR) == 0xDE7FAE23A9A1B716 == CHAIN_HEAD_HASH


def test_worked_chain():
    assert chain_hashes([10, 20, 30], [0, 1, 2]) == [0xDE7FAE23A9A1B716, 0xCD6D3FC64AB68B75, 0x2C17D4BB20B967A5]
    assert mix3(CHAIN_HEAD_HASH, 10, 0) == 0xCD6D3FC64AB68B75


def test_mix3_definition_and_negative_inputs():
    a, b, c = 123, -1, 2**63
    assert mix3(a, b, c) == splitmix64(splitmix64(splitmix64(a) ^ (2**64 - 1)) ^ 2**63)


def test_no_collisions(rng):
    xs = rng.integers(0, 2**63, size=1000, dtype=np.int64)
    assert len({splitmix64(int(x)) for x in xs}) == len(set(int(x) for x in xs))


@cuda.jit
def _hash_kernel(a, b, c, out_h, out_m):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out_h[i] = as_int64_dev(splitmix64_dev(np.uint64(a[i])))
        out_m[i] = as_int64_dev(mix3_dev(a[i], b[i], c[i]))


def test_device_equals_host(rng):
    n = 64
    a, b, c = (rng.integers(-2**63, 2**63 - 1, size=n, dtype=np.int64) for _ in range(3))
    a[:4] = [0, -1, CANARY_CHAIN_ANCHOR - 2**64, 2**63 - 1]
    out_h = device.to_device(np.zeros(n, np.int64))
    out_m = device.to_device(np.zeros(n, np.int64))
    device.launch(_hash_kernel, 1, n, device.to_device(a), device.to_device(b), device.to_device(c), out_h, out_m)
    got_h, got_m = device.to_host(out_h), device.to_host(out_m)
    for i in range(n):
        assert int(got_h[i]) & (2**64 - 1) == splitmix64(int(a[i]))
        assert int(got_m[i]) & (2**64 - 1) == mix3(int(a[i]), int(b[i]), int(c[i]))


def test_constants():
    assert [t.value for t in CanaryLaunchTag] == list(range(12))
    assert CanaryLaunchTag.SWEEP_V_SWA == 11 and CanaryLaunchTag.HEAD_K_SWA == 6
    assert [int(f) for f in FailReason] == [1, 2, 4, 8, 16, 32]
    assert FailReason.VERIFY_TOKEN_MISMATCH == 32 and FailReason.WRITE_POSITION_MISMATCH == 16
    assert (RealKvHashMode.NONE, RealKvHashMode.PARTIAL, RealKvHashMode.ALL) == (0, 1, 2)
