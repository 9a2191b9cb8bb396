"""The speculative swap-in's value checks (docs/speculative-swap-in.md, "What a call must satisfy"):
the device pass and its NumPy reference agree, every rule rejects before anything is written,
``checks="shapes"`` skips them, and the allocation helpers make what the launchers accept."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.miss_plan import alloc_miss_plan
from hisparse_numba.hisparse.speculative.examples import (host_copy, make_spec_problem, mismatches,
                                                   run_kernel_and_reference, set_selection,
                                                   snapshot)
from hisparse_numba.hisparse.speculative.state import (initialize_hisparse_spec_state,
                                                make_hisparse_spec_state)
from hisparse_numba.hisparse.speculative import (check_speculative,
                                                 load_cache_to_device_buffer_spec_mla,
                                                 load_cache_to_device_buffer_spec_mla_reference)
from hisparse_numba.hisparse.speculative.value_checks import (start_value_checks,
                                                              value_checks_reference)
from tests.sweep import speculative as sweep_spec
from tests.sweep.harness import copy_call, default_to_device, to_host_call

xp = device.xp
VALUE_ARGUMENTS = ("req_pool_indices", "num_real_reqs", "seq_lens", "host_cache_locs",
                   "device_buffer_locs", "state.scratch_locs", "state.scratch_state",
                   "state.cache_policy", "top_k_tokens", "device_buffer_tokens", "state.cache_index")


def value_mutations():
    base = sweep_spec.build_spec(np.random.default_rng(0))
    return base, [m for m in sweep_spec.spec_mutations(base)     # (the wide ones are judged, not labelled)
                  if m.group == "core" and m.argument in VALUE_ARGUMENTS and ":" in m.name and
                  not any(w in m.name for w in ("dtype", "axis", "Python", "string", "None",
                                                "flattened", "0-d", "stride", "Fortran", "offset",
                                                "one more", "aliases", "view"))]


def test_device_verdict_equals_the_reference_verdict():
    base, mutations = value_mutations()
    assert len(mutations) >= 30
    rejected = 0
    with sweep_spec.quick_thread_switches():
        for m in mutations:
            call = default_to_device(copy_call(base))
            m.apply(call)
            checked = check_speculative(**call, checks="shapes", for_kernel=True)
            host = check_speculative(**to_host_call(call), checks="shapes")
            got, want = start_value_checks(checked).verdict(), value_checks_reference(host)
            assert got == want, m.name
            rejected += any(count for count, _ in want)
            assert bool(any(count for count, _ in want)) == m.must_reject, m.name
    assert rejected >= 20


def small(record=True):
    kw = make_spec_problem(batch=2, steps=2, top_k=8, hot=16, tail=4, item_words=2,
                           max_positions=64, scratch_capacity=4, record=record)
    set_selection(kw, np.arange(32).reshape(2, 2, 8) % 24 + 12, np.full(4, 40))
    return kw


def assert_rejected_cleanly(kw, match):
    before = snapshot(kw)
    for fn, args in ((load_cache_to_device_buffer_spec_mla, kw),
                     (load_cache_to_device_buffer_spec_mla_reference, host_copy(kw))):
        with pytest.raises(ValueError, match=match):
            fn(**args)
    after = snapshot(kw)
    for k in before:
        np.testing.assert_array_equal(before[k], after[k], err_msg=k)


def test_a_metadata_row_that_looks_full_is_rejected_instead_of_probing_forever():
    kw = small()
    st = device.to_host(kw["state"].scratch_state)
    rid = int(device.to_host(kw["req_pool_indices"])[0])
    n = kw["state"].scratch_locs.shape[0]
    sigma = (int(st[0, 3 * n + rid]) & 0x7FFFFFFF) + 1
    row = st[rid + 1, :32].view(np.int64)
    row[:] = (sigma << 32) | np.arange(16)
    kw["state"].scratch_state[...] = xp.asarray(st)
    assert_rejected_cleanly(kw, "scratch epoch")


def test_unassigned_landing_zone_is_rejected_and_shapes_mode_defines_the_plan():
    kw = small()
    rid = int(device.to_host(kw["req_pool_indices"])[0])
    locs = device.to_host(kw["state"].scratch_locs)
    locs[rid, 1] = -1
    kw["state"].scratch_locs[...] = xp.asarray(locs)
    assert_rejected_cleanly(kw, r"state.scratch_locs\[%d, 1\] = -1" % rid)
    # checks="shapes" trusts the caller: the miss with no landing location outputs -1 and its
    # plan entry is (-1, -1), never a previous call's pair
    kw["miss_src"][...] = 77
    kw["miss_dst"][...] = 77
    got, want = run_kernel_and_reference({**kw, "checks": "shapes"})
    assert mismatches(got, want) == []
    assert got["miss_count"][0] >= 2
    assert got["miss_src"][0, 1] == -1 and got["miss_dst"][0, 1] == -1


def test_unresolved_direct_overflow_writes_an_empty_plan_entry():
    kw = make_spec_problem(batch=1, steps=4, top_k=16, hot=8, tail=0, item_words=2,
                           max_positions=256, scratch_capacity=1, record=True)
    set_selection(kw, (100 + np.arange(64)).reshape(1, 4, 16), np.full(4, 200))
    kw["miss_src"][...] = 77
    kw["miss_dst"][...] = 77
    got, want = run_kernel_and_reference(kw)
    assert mismatches(got, want) == []
    m = int(got["miss_count"][0])
    assert m == 64
    empty = (got["miss_src"][0, :m] == -1)
    assert empty.any() and (got["miss_dst"][0, :m][empty] == -1).all()
    assert (got["miss_src"][0, :m] != 77).all()


@pytest.mark.parametrize("value", [16.0, 16.5, float("inf"), float("nan"), "16", True, [16]])
def test_item_size_bytes_is_validated_not_coerced(value):
    kw = small()
    with pytest.raises((ValueError, TypeError), match="item_size_bytes"):
        load_cache_to_device_buffer_spec_mla(**{**kw, "item_size_bytes": value})
    load_cache_to_device_buffer_spec_mla(**{**kw, "item_size_bytes": np.int64(16)})


def test_unknown_checks_mode_is_rejected():
    with pytest.raises(ValueError, match="checks must be"):
        load_cache_to_device_buffer_spec_mla(**{**small(), "checks": "none"})


def test_made_state_with_a_landing_zone_is_accepted():
    kw = small(record=False)
    n, cap = kw["state"].scratch_locs.shape
    locs = device.to_host(kw["state"].scratch_locs)
    state = make_hisparse_spec_state(n, 16, 2, 8, scratch_locs=locs)
    initialize_hisparse_spec_state(device_buffer_tokens=kw["device_buffer_tokens"],
                                   req_pool_indices=xp.arange(n, dtype=xp.int64), state=state)
    src, dst, count = alloc_miss_plan(2, 2, 8)
    got, want = run_kernel_and_reference({**kw, "state": state, "miss_src": src, "miss_dst": dst,
                                          "miss_count": count})
    assert mismatches(got, want) == []
    bare = make_hisparse_spec_state(n, 16, 2, 8, cap)
    initialize_hisparse_spec_state(device_buffer_tokens=kw["device_buffer_tokens"],
                                   req_pool_indices=xp.arange(n, dtype=xp.int64), state=bare)
    with pytest.raises(ValueError, match="state.scratch_locs.*landing zone"):
        load_cache_to_device_buffer_spec_mla(**{**kw, "state": bare})


@pytest.mark.parametrize("args,match", [
    ((0, 16, 2, 8), "num_requests"), ((3, 1, 2, 8), "hot_buffer_size"), ((3, 16, 5, 8), "num_steps"),
    ((3, 16, 4, 4096), "num_top_k"), ((17, 16, 2, 8), "num_requests"), ((3, 16, 2, 8, 0), "scratch_capacity"),
    ((3, 16.0, 2, 8), "hot_buffer_size"), ((3, 16, 2, "8"), "num_top_k")])
def test_make_state_rejects_sizes_the_launchers_would_reject(args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make_hisparse_spec_state(*args)


def test_initialize_rejects_bad_request_indices_before_writing():
    kw = small()
    state = kw["state"]
    before = [device.to_host(a).copy() for a in state]
    for rids, match in (([0, 3], r"req_pool_indices\[1\] = 3"), ([-1], r"req_pool_indices\[0\] = -1"),
                        ([1, 1], "more than once")):
        with pytest.raises(ValueError, match=match):
            initialize_hisparse_spec_state(device_buffer_tokens=kw["device_buffer_tokens"],
                                           req_pool_indices=xp.asarray(np.array(rids, dtype=np.int64)),
                                           state=state)
    for a, b in zip(state, before):
        np.testing.assert_array_equal(device.to_host(a), b)
