"""HiSparseSpecState allocation, the miss-plan allocation and initialize_hisparse_spec_state."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.miss_plan import alloc_miss_plan, miss_plan_capacity
from hisparse_numba.hisparse.speculative.hash import hash_insert_reference, hash_lookup_reference
from hisparse_numba.hisparse.speculative.state import (
    COUNT_GEN, HiSparseSpecState, hash_size_for, initialize_hisparse_spec_state,
    initialize_hisparse_spec_state_reference, make_hisparse_spec_state, metadata_width)
from hisparse_numba.hisparse.speculative import table_find_reference, table_insert_reference


def test_state_shapes_match_sglang_layout():
    st = make_hisparse_spec_state(3, 4096, 4, 2048)
    assert st.cache_index.shape == (3, 2, 8192) and st.cache_index.dtype == np.int64
    assert st.cache_policy.shape == (4, 4096) and st.cache_policy.dtype == np.int32
    assert st.scratch_locs.shape == (3, 4096) and st.scratch_locs.dtype == np.int32
    assert st.scratch_state.shape == (4, 40960) and st.scratch_state.dtype == np.int32
    ss = device.to_host(st.scratch_state)
    assert (ss[0] == 0).all() and (ss[1:] == -1).all()
    assert hash_size_for(3000) == 8192 and metadata_width(1, 3, 1025) == 15376


def test_miss_plan_capacity_and_allocation():
    assert miss_plan_capacity(4, 2048) == 8192
    src, dst, cnt = alloc_miss_plan(5, 4, 2048)
    assert src.shape == (5, 8192) and src.dtype == np.int64
    assert dst.shape == (5, 8192) and dst.dtype == np.int32
    assert cnt.shape == (5,) and cnt.dtype == np.int32
    assert src.strides[0] // 8 == dst.strides[0] // 4


def _state_host(st):
    return HiSparseSpecState(*(device.to_host(a) for a in st))


@pytest.mark.parametrize("hash_size", [None, 4])
def test_initialize_kernel_equals_reference(rng, hash_size):
    n, hot, tail = 3, 16, 4
    st = make_hisparse_spec_state(n, hot, 2, 8)
    if hash_size:  # a tiny hash forces cuckoo failures: the state must degrade identically
        st = st._replace(cache_index=device.xp.full((n, 2, hash_size), -1, dtype=device.xp.int64))
    dbt = np.full((n, hot + tail), -1, dtype=np.int32)
    for r in range(n):
        dbt[r, :hot] = rng.permutation(1000)[:hot]
        dbt[r, rng.integers(0, hot, 3)] = -1
    # dirty the state so that the reset is visible
    for a in st:
        a[...] = device.xp.asarray(rng.integers(-3, 50, a.shape).astype(a.dtype))
    ref = _state_host(st)
    rpi = np.array([2, 0], dtype=np.int64)
    initialize_hisparse_spec_state(device_buffer_tokens=device.to_device(dbt),
                                   req_pool_indices=device.to_device(rpi), state=st)
    initialize_hisparse_spec_state_reference(device_buffer_tokens=dbt, req_pool_indices=rpi, state=ref)
    got = _state_host(st)
    for f, a, b in zip(got._fields, got, ref):
        np.testing.assert_array_equal(a, b, err_msg=f)
    degraded = ref.scratch_state[0, COUNT_GEN * n + 2] < 0
    assert degraded == bool(hash_size)
    for r in (0, 2):  # every hot token is found again
        for s in range(hot):
            if dbt[r, s] >= 0:
                assert hash_lookup_reference(ref.cache_index[r, 0], ref.cache_index[r, 1], dbt[r],
                                             int(dbt[r, s]), hot, degraded) == s


def test_scratch_table_layout_is_independent_of_insertion_order(rng):
    tokens = rng.integers(0, 200, 40)
    layouts = []
    for _ in range(5):
        table = np.full(64, -1, dtype=np.int64)
        for tok in rng.permutation(tokens):
            table_insert_reference(table, 7, int(tok))
        layouts.append(table)
        for tok in tokens:
            assert table[table_find_reference(table, 7, int(tok))] == (7 << 32) | int(tok)
    for layout in layouts[1:]:
        np.testing.assert_array_equal(layout, layouts[0])


def test_hash_insert_rounds_place_every_entry():
    bank0 = np.full(16, -1, dtype=np.int64)
    bank1 = np.full(16, -1, dtype=np.int64)
    entries = [(s << 32) | (s * 5 + 3) for s in range(8)]
    assert not hash_insert_reference(bank0, bank1, entries)
    assert sorted(int(e) for e in np.concatenate([bank0, bank1]) if e >= 0) == sorted(entries)
