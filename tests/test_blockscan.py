"""The block scan equals NumPy's cumulative sum: warp shuffles on a GPU (whole warps), shared
memory alone in the simulator and for blocks that are not whole warps."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.blockscan import block_exclusive_scan_dev
from hisparse_numba.device import cuda
from tests.conftest import ON_GPU


@cuda.jit
def _scan_kernel(values, prefix, totals):
    scan = cuda.shared.array(1024, np.int64)
    tid = cuda.threadIdx.x
    before, total = block_exclusive_scan_dev(scan, values[tid], tid, cuda.blockDim.x)
    prefix[tid] = before
    before, again = block_exclusive_scan_dev(scan, values[tid] + 1, tid, cuda.blockDim.x)  # reuse at once
    if tid == 0:
        totals[0] = total
        totals[1] = again


@pytest.mark.parametrize("threads", [32, 64, 40] + ([96, 1000, 1024] if ON_GPU else []))
def test_block_exclusive_scan_equals_cumsum(threads):
    values = np.random.default_rng(threads).integers(0, 1000, threads).astype(np.int64)
    prefix = device.to_device(np.full(threads, -1, np.int64))
    totals = device.to_device(np.zeros(2, np.int64))
    device.launch(_scan_kernel, 1, threads, device.to_device(values), prefix, totals)
    want = np.concatenate([[0], np.cumsum(values)[:-1]])
    np.testing.assert_array_equal(device.to_host(prefix), want)
    assert device.to_host(totals).tolist() == [values.sum(), values.sum() + threads]
