"""The speculative state's hash inserts on the device against hash_insert_reference, both ways of
settling a round: in a shared table (the speculative commit) and by racing on the banks (the
initialiser); with the items staged by the caller (the commit) or by the insert itself."""

import functools

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.device import cuda
from hisparse_numba.hisparse.speculative.hash import (SETTLE_CELLS, clear_cells_dev, hash_insert_dev,
                                               hash_insert_reference, settle_offer_dev,
                                               settle_winner_dev, stage_item_dev)

THREADS = 16
MAX_ITEMS = 32


@functools.cache
def _insert_kernel(num_cells: int, staged: bool):
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
        if staged:    # as the commit does it, in the pass that fills the slots
            i = tid
            while i < n_items:
                s = slots[i]
                stage_item_dev(pend, scan, i, s, dbt[1, s] if s >= 0 else -1)
                i += THREADS
            clear_cells_dev(cells, tid, THREADS)
            cuda.syncthreads()
        hash_insert_dev(cache_index, 1, dbt, slots, n_items, pend, flag, scan, cells, tid, THREADS,
                        staged)
        if tid == 0:
            degraded[0] = flag[0]

    return insert


@pytest.mark.parametrize("staged", [False, True], ids=["unstaged", "staged"])
@pytest.mark.parametrize("num_cells", [SETTLE_CELLS, 2 * MAX_ITEMS, 1],
                         ids=["shared-settle", "small-table", "racing-rounds"])
@pytest.mark.parametrize("bank_size, n_items", [(16, 12), (8, 9), (64, 32), (4, 20)])
def test_hash_insert_dev_equals_reference(rng, num_cells, bank_size, n_items, staged):
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
        device.launch(_insert_kernel(num_cells, staged), 1, THREADS, cache_index, device.to_device(dbt),
                      device.to_device(slots), n_items, degraded)
        np.testing.assert_array_equal(device.to_host(cache_index), want, err_msg=f"trial {trial}")
        assert bool(device.to_host(degraded)[0]) == want_degraded


@functools.cache
def _settle_kernel(num_cells: int):
    @cuda.jit
    def settle(banks, buckets, slots, phases, mask, winners):
        tid = cuda.threadIdx.x
        cells = cuda.shared.array(num_cells, np.int32)
        clear_cells_dev(cells, tid, THREADS)
        cuda.syncthreads()
        for phase in range(2):
            if phases[tid] == phase:
                settle_offer_dev(cells, banks[tid], buckets[tid], mask, slots[tid])
            cuda.syncthreads()
        winners[tid] = settle_winner_dev(cells, banks[tid], buckets[tid], mask)

    return settle


def _settle(num_cells, banks, buckets, slots, phases, mask):
    winners = device.to_device(np.zeros(THREADS, dtype=np.int32))
    device.launch(_settle_kernel(num_cells), 1, THREADS, *(device.to_device(np.asarray(a, np.int32))
                  for a in (banks, buckets, slots, phases)), mask, winners)
    return device.to_host(winners)


def _largest_slots(banks, buckets, slots):
    best = {}
    for k, s in zip(zip(banks, buckets), slots):
        best[k] = max(best.get(k, -1), int(s))
    return np.array([best[k] for k in zip(banks, buckets)], dtype=np.int32)


def test_settle_table_keeps_the_banks_apart_when_probes_cross():
    """Bank 0's buckets 8-15 fill the cells from 8 on, then bank 1's bucket 0 (home 8) probes past
    them to the cell of bank 0's bucket 0: the same bucket number, not the same key."""
    mask = 31
    banks = [0] * 8 + [0, 0, 0] + [1] * 5
    buckets = list(range(8, 16)) + [0] * 8
    slots = [100 + i for i in range(8)] + [7, 30, 9] + [20, 3, 25, 11, 2]
    phases = [0] * 11 + [1] * 5
    want = _largest_slots(banks, buckets, slots)
    assert want[8] == 30 and want[11] == 25
    np.testing.assert_array_equal(_settle(16, banks, buckets, slots, phases, mask), want)


@pytest.mark.parametrize("num_cells", [16, 32])
def test_settle_table_keeps_the_largest_slot_of_each_bank_and_bucket(rng, num_cells):
    """Random offers to a few buckets of both banks, in two phases: each (bank, bucket) keeps its
    largest slot."""
    mask = 31
    for trial in range(10):
        banks = rng.integers(0, 2, THREADS)
        buckets = rng.permutation(mask + 1)[rng.integers(0, THREADS // 2, THREADS)]
        slots = rng.permutation(1 << 15)[:THREADS]
        phases = rng.integers(0, 2, THREADS)
        np.testing.assert_array_equal(_settle(num_cells, banks, buckets, slots, phases, mask),
                                      _largest_slots(banks, buckets, slots), err_msg=f"trial {trial}")
