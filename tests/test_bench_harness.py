"""The benchmark harness's zero-copy gather: the copy-only ceiling printed by ``bench spec``."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.bench import harness

from .conftest import BIG


@pytest.mark.parametrize("blocks,threads", [(1, 32), (3, 64)])
def test_zero_copy_gather_kernel_copies_every_listed_item(rng, blocks, threads):
    words, n_host, n_dev, n = 72, 48, 40, 25          # 576-byte items: 72 words, not a power of two
    host = device.host_cache_array((n_host, words), np.uint64)
    host[:] = rng.integers(0, 2**63, size=(n_host, words), dtype=np.uint64)
    src = rng.choice(n_host, size=n, replace=False).astype(np.int64)
    dst = rng.choice(n_dev, size=n, replace=False).astype(np.int64)
    start = rng.integers(0, 2**63, size=(n_dev, words), dtype=np.uint64)
    expected = start.copy()
    expected[dst] = np.asarray(host)[src]
    buf = device.to_device(start)
    device.launch(harness.zero_copy_gather_kernel, blocks, threads, device.byte_words(host),
                  device.to_device(src), device.byte_words(buf), device.to_device(dst), words)
    assert np.array_equal(device.to_host(buf), expected)


@pytest.mark.gpu
def test_zero_copy_gather_ms_times_a_correct_copy(rng):
    words, n = 72, (8192 if BIG else 256)
    host = device.host_cache_array((2 * n, words), np.uint64)
    host[:] = rng.integers(0, 2**63, size=(2 * n, words), dtype=np.uint64)
    src = rng.permutation(2 * n)[:n].astype(np.int64)
    dst = rng.permutation(n).astype(np.int64)
    buf = device.xp.zeros((n, words), dtype=np.uint64)
    ms = harness.zero_copy_gather_ms(host, buf, device.to_device(src), device.to_device(dst), 8 * words, iters=3)
    assert ms > 0
    assert np.array_equal(device.to_host(buf)[dst], np.asarray(host)[src])
