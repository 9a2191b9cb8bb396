"""The lesson-00 gather kernel against its reference."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.gather import gather_to_hot_buffer, gather_to_hot_buffer_reference

from ..conftest import BIG


@pytest.mark.parametrize("item_size_bytes", [16, 32, 48, 576])
def test_gather_matches_reference(rng, item_size_bytes):
    n_host, n_dev, n = (4096, 2048, 1024) if BIG else (40, 24, 12)
    host = device.host_cache_array((n_host, item_size_bytes), np.uint8)
    host[:] = rng.integers(0, 256, size=(n_host, item_size_bytes), dtype=np.uint8)
    src = rng.choice(n_host, size=n, replace=False).astype(np.int64)
    dst = rng.choice(n_dev, size=n, replace=False).astype(np.int64)
    start = rng.integers(0, 256, size=(n_dev, item_size_bytes), dtype=np.uint8)
    expected = start.copy()
    gather_to_hot_buffer_reference(host_cache=np.asarray(host), device_buffer=expected,
                                   src_locs=src, dst_locs=dst, item_size_bytes=item_size_bytes)
    buf = device.to_device(start)
    gather_to_hot_buffer(host_cache=host, device_buffer=buf, src_locs=device.to_device(src),
                         dst_locs=device.to_device(dst), item_size_bytes=item_size_bytes)
    assert np.array_equal(device.to_host(buf), expected)


@pytest.mark.parametrize("item_size_bytes,message", [
    (24, "The pointers must be multiple of 16 bytes."),
    (32, "dst_locs must be distinct"),
])
def test_gather_rejects_before_writing(item_size_bytes, message):
    host = device.host_cache_array((8, 48), np.uint8)
    host[:] = 7
    buf = device.to_device(np.zeros((8, 48), np.uint8))
    src = device.to_device(np.array([1, 2], np.int64))
    dst = device.to_device(np.array([3, 3], np.int64))
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        gather_to_hot_buffer(host_cache=host, device_buffer=buf, src_locs=src, dst_locs=dst,
                             item_size_bytes=item_size_bytes)
    assert not device.to_host(buf).any()


@pytest.mark.parametrize("src,dst,message", [
    ([1, 8], [3, 4], r"src_locs\[1\] = 8"),
    ([1, 2], [3, 8], r"dst_locs\[1\] = 8"),
    ([-1, 2], [3, 4], "must be >= 0"),
])
def test_gather_locations_are_checked_on_the_device(src, dst, message):
    host = device.host_cache_array((8, 48), np.uint8)
    buf = device.to_device(np.zeros((8, 48), np.uint8))
    with pytest.raises(ValueError, match=message):
        gather_to_hot_buffer(host_cache=host, device_buffer=buf, src_locs=device.to_device(np.array(src, np.int64)),
                             dst_locs=device.to_device(np.array(dst, np.int64)), item_size_bytes=48)
    assert not device.to_host(buf).any()
