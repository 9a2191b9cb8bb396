"""The speculative state's hash inserts on the device against hash_insert_reference, both ways of
settling a round: in a shared table (the speculative commit) and by racing on the banks (the
initialiser)."""

import functools

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.device import cuda
from hisparse_numba.hisparse.spec_hash import SETTLE_CELLS, hash_insert_dev, hash_insert_reference

THREADS = 16
MAX_ITEMS = 32


@functools.cache
def _insert_kernel(num_cells: int):
    @cuda.jit
    def insert(cache_index, dbt, slots_in, n_items, degraded):
        tid = cuda.threadIdx.x
        slots = cuda.shared.array(MAX_ITEMS, np.int16)
        pend = cuda.shared.array(MAX_ITEMS, np.int16)
        flag = cuda.shared.array(1, np.int32)
        scan = cuda.shared.array(MAX_ITEMS, np.int32)
        cells = cuda.shared.array(num_cells, np.int32)
        i = tid
        while i < n_items:
            slots[i] = slots_in[i]
            i += THREADS
        if tid == 0:
            flag[0] = 0
        cuda.syncthreads()
        hash_insert_dev(cache_index, 1, dbt, slots, n_items, pend, flag, scan, cells, tid, THREADS,
                        False)
        if tid == 0:
            degraded[0] = flag[0]

    return insert


@pytest.mark.parametrize("num_cells", [SETTLE_CELLS, 2 * MAX_ITEMS, 1],
                         ids=["shared-settle", "small-table", "racing-rounds"])
@pytest.mark.parametrize("bank_size, n_items", [(16, 12), (8, 9), (64, 32), (4, 20)])
def test_hash_insert_dev_equals_reference(rng, num_cells, bank_size, n_items):
    hot = 48
    for trial in range(4):
        banks = rng.choice([-1, -2, 0], size=(3, 2, bank_size), p=[0.55, 0.15, 0.3]).astype(np.int64)
        taken = banks == 0       # occupied buckets hold entries of other (slot, token) pairs
        banks[taken] = (rng.integers(0, hot, taken.sum()) << 32) | rng.integers(1000, 2000, taken.sum())
        dbt = np.full((3, hot), -1, dtype=np.int32)
        dbt[1] = rng.permutation(500)[:hot]
        slots = rng.permutation(hot)[:n_items].astype(np.int16)
        slots[rng.random(n_items) < 0.2] = -1       # items without a slot insert nothing
        entries = [(int(s) << 32) | int(dbt[1, s]) for s in slots if s >= 0]
        want = banks.copy()
        want_degraded = hash_insert_reference(want[1, 0], want[1, 1], entries)
        cache_index = device.to_device(banks)
        degraded = device.to_device(np.zeros(1, dtype=np.int32))
        device.launch(_insert_kernel(num_cells), 1, THREADS, cache_index, device.to_device(dbt),
                      device.to_device(slots), n_items, degraded)
        np.testing.assert_array_equal(device.to_host(cache_index), want, err_msg=f"trial {trial}")
        assert bool(device.to_host(degraded)[0]) == want_degraded
