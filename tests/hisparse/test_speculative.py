"""load_cache_to_device_buffer_spec_mla: validation and sglang's unit scenarios (the behaviour in
docs/speculative-swap-in.md).

Scenarios run scaled down in the simulator and at sglang's sizes on a GPU (hot buffer 4096,
tail 64, 4 x 2048 occurrences, 576-byte items). Every scenario also checks kernel == reference
on every output and state array, for every rung of the kernel (the ``spec_version`` fixture).
"""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.miss_plan import alloc_miss_plan
from hisparse_numba.hisparse.speculative.examples import (host_item_words, make_spec_problem, mismatches,
                                                   run_kernel_and_reference, set_selection,
                                                   snapshot, wrong_items)
from hisparse_numba.hisparse.speculative import (
    load_cache_to_device_buffer_spec_mla, load_cache_to_device_buffer_spec_mla_reference)
from tests.conftest import ON_GPU, assert_sanitizer_clean

xp = device.xp

if ON_GPU:
    CFG = dict(hot=4096, tail=64, steps=4, top_k=2048, item_words=72, seq=16384, miss=196)
else:
    CFG = dict(hot=32, tail=8, steps=4, top_k=16, item_words=2, seq=256, miss=3)
H, TAIL, S, K, W, SEQ, MISS = (CFG[k] for k in ("hot", "tail", "steps", "top_k", "item_words", "seq", "miss"))
T = S * K


def problem(batch=1, **kw):
    args = dict(batch=batch, steps=S, top_k=K, hot=H, tail=TAIL, item_words=W,
                max_positions=SEQ, scratch_capacity=max(T - H, 1))
    args.update(kw)
    return make_spec_problem(**args)


def run(kw, version=None):
    got, want = run_kernel_and_reference(kw, version)
    assert mismatches(got, want) == []
    assert wrong_items(got, W) == []
    return got


# ------------------------------------------------------------------------------------------
# sglang's scenarios

def test_deduplicates_repeated_misses_and_copies_full_items(spec_version):
    kw = problem()
    hits = np.arange(K - MISS)
    misses = H + np.arange(MISS)
    tokens = np.tile(np.concatenate([hits, misses]), (1, S, 1))
    set_selection(kw, tokens, np.full(S, SEQ))
    got = run(kw, spec_version)
    rid = int(got["req_pool_indices"][0])
    assert got["state.scratch_state"][0, rid] == MISS  # one copy per unique miss, not S * MISS
    locs = got["top_k_device_locs"][0, :, K - MISS:]
    assert (locs == locs[0]).all() and (locs >= 0).all()


def cross_step_selection():
    """Steps 0/1: MISS fresh misses; steps 2/3 reuse one miss of step 0/1 plus MISS-1 fresh."""
    fresh = iter(range(H, H + 4 * MISS))
    step_misses = [[next(fresh) for _ in range(MISS)] for _ in range(2)]
    step_misses += [[step_misses[s][0]] + [next(fresh) for _ in range(MISS - 1)] for s in range(2)]
    tokens = np.stack([np.concatenate([(s + np.arange(K - MISS)) % H, step_misses[s]]) for s in range(S)])
    unique = len({t for m in step_misses for t in m})
    assert unique == 4 * MISS - 2
    return tokens[None], unique


def test_copies_cross_step_unique_misses(spec_version):
    kw = problem()
    tokens, unique = cross_step_selection()
    set_selection(kw, tokens, np.full(S, SEQ))
    got = run(kw, spec_version)
    assert got["state.scratch_state"][0, int(got["req_pool_indices"][0])] == unique


def replay_plan(plan_src, plan_dst, plan_count, host_cache, device_buffer, item_size):
    try:
        from hisparse_numba.hisparse.single_step.planned_copy import copy_cache_planned_mla
    except ImportError:
        pytest.skip("planned_copy.copy_cache_planned_mla is not there yet")
    copy_cache_planned_mla(miss_src=plan_src, miss_dst=plan_dst, miss_count=plan_count,
                           num_real_reqs=device.to_device(np.array([plan_count.shape[0]], np.int32)),
                           host_cache=host_cache, device_buffer=device_buffer,
                           item_size_bytes=item_size)
    device.synchronize()


def test_records_union_plan_for_shared_layer_io(spec_version):
    kw = problem(record=True)
    tokens, unique = cross_step_selection()
    set_selection(kw, tokens, np.full(S, SEQ))
    got = run(kw, spec_version)
    assert got["miss_count"][0] == unique
    src, dst = got["miss_src"][0, :unique], got["miss_dst"][0, :unique]
    assert (src >= 0).all() and (dst >= 0).all()
    skip_layer = xp.full(kw["device_buffer"].shape, -1, dtype=xp.int64)
    replay_plan(kw["miss_src"], kw["miss_dst"], kw["miss_count"], kw["host_cache"], skip_layer, 8 * W)
    replayed = device.to_host(skip_layer)
    np.testing.assert_array_equal(replayed[dst], host_item_words(src, W))
    np.testing.assert_array_equal(replayed[dst], got["device_buffer"][dst])


def test_padded_request_clears_stale_plan_count(spec_version):
    kw = problem(batch=2, record=True)
    kw["miss_count"][...] = 123
    tokens = np.tile(np.arange(K), (2, S, 1))
    set_selection(kw, tokens, np.full(2 * S, SEQ), num_real_reqs=1)
    got = run(kw, spec_version)
    assert got["miss_count"][1] == 0
    assert (got["top_k_device_locs"][1] == 0).all()


@pytest.mark.skipif(ON_GPU, reason="only the simulator raises inside a kernel")
def test_aborted_launch_leaves_the_workspace_clean():
    from hisparse_numba.hisparse.speculative import check_speculative, launch_unchecked, workspace
    from hisparse_numba.hisparse.speculative.device_fns import EMPTY_KEY, NO_OCCURRENCE
    kw = problem(record=True)
    tokens, unique = cross_step_selection()
    set_selection(kw, tokens, np.full(S, SEQ))
    call = check_speculative(**kw, for_kernel=True)
    with pytest.raises(IndexError):                  # plan entry 1 of a 1-column plan
        launch_unchecked(call._replace(miss_src=kw["miss_src"][:, :1], miss_dst=kw["miss_dst"][:, :1]))
    work = workspace(call.batch, T)
    assert not device.to_host(work.counters).any() and not device.to_host(work.flags).any()
    assert (device.to_host(work.claim_keys) == EMPTY_KEY).all()
    assert (device.to_host(work.claim_first) == NO_OCCURRENCE).all()
    n = kw["state"].scratch_locs.shape[0]
    assert not device.to_host(kw["state"].scratch_state)[0, n:3 * n].any()   # running counters
    run(kw)                                          # same sizes, same workspace: still exact


def test_resolves_speculative_extra_page_slots_without_host_io(spec_version):
    kw = problem()
    draft = SEQ - S + np.arange(S)
    offsets = np.linspace(0, TAIL - 1, S).astype(int)
    rid = int(device.to_host(kw["req_pool_indices"])[0])
    dbt = device.to_host(kw["device_buffer_tokens"])
    dbt[rid, H + offsets] = draft
    kw["device_buffer_tokens"][...] = xp.asarray(dbt)
    hcl = device.to_host(kw["host_cache_locs"])
    hcl[rid, draft] = -1
    kw["host_cache_locs"][...] = xp.asarray(hcl)
    tokens = np.stack([np.concatenate([np.arange(K - 1), [draft[s]]]) for s in range(S)])[None]
    set_selection(kw, tokens, draft + 1)
    got = run(kw, spec_version)
    tail_locs = got["device_buffer_locs"][rid, H + offsets]
    np.testing.assert_array_equal(got["top_k_device_locs"][0, :, -1], tail_locs)
    assert got["state.scratch_state"][0, rid] == 0


def test_full_union_overflow_preserves_all_outputs(spec_version):
    kw = problem(record=True, scratch_capacity=T - H)
    tokens = (H + np.arange(T)).reshape(1, S, K)
    set_selection(kw, tokens, np.full(S, SEQ))
    got = run(kw, spec_version)
    out = got["top_k_device_locs"].reshape(-1)
    assert (out >= 0).all() and len(np.unique(out)) == T
    rid = int(got["req_pool_indices"][0])
    assert got["state.scratch_state"][0, rid] == T and got["miss_count"][0] == T
    assert (got["miss_src"][0] >= 0).all() and (got["miss_dst"][0] >= 0).all()


def test_packed_entries_keep_million_token_positions(spec_version):
    seq = 1_048_648
    kw = problem(max_positions=seq, host_rows_per_request=4 * (H + T))
    tokens = np.stack([np.concatenate([np.arange(K - 1), [seq - 1]]) for _ in range(S)])[None]
    set_selection(kw, tokens, np.full(S, seq))
    got = run(kw, spec_version)
    rid = int(got["req_pool_indices"][0])
    assert (got["top_k_device_locs"] >= 0).all() and got["state.scratch_state"][0, rid] == 1
    got = run(kw, spec_version)  # the high token is now a hot hit
    assert got["state.scratch_state"][0, rid] == 0


# ------------------------------------------------------------------------------------------
# Validation: exact texts, order, nothing written on rejection

def small():
    kw = make_spec_problem(batch=2, steps=2, top_k=8, hot=16, tail=4, item_words=2, max_positions=64)
    set_selection(kw, np.arange(32).reshape(2, 2, 8) % 20, np.full(4, 40))
    return kw


def plan(batch=2, cols=16, src_dtype=np.int64, dst_dtype=np.int32, count_shape=(2,), count_dtype=np.int32):
    return dict(miss_src=xp.zeros((batch, cols), dtype=src_dtype),
                miss_dst=xp.zeros((batch, cols), dtype=dst_dtype),
                miss_count=xp.zeros(count_shape, dtype=count_dtype))


def three_d(steps):
    return dict(top_k_tokens=xp.zeros((2, steps, 8), dtype=xp.int32),
                top_k_device_locs=xp.zeros((2, steps, 8), dtype=xp.int32))


wide = xp.zeros((2, 32), dtype=xp.int32)
CASES = [
    ("steps 1", three_d(1), "HiSparse speculative swap requires 2-4 steps, got 1."),
    ("steps 5 before a partial plan", {**three_d(5), "miss_src": xp.zeros((2, 40), dtype=xp.int64)},
     "HiSparse speculative swap requires 2-4 steps, got 5."),
    ("partial plan", {"miss_src": xp.zeros((2, 16), dtype=xp.int64), "miss_dst": xp.zeros((2, 16), dtype=xp.int32)},
     "miss_src, miss_dst, and miss_count must be provided together."),
    ("only miss_count", {"miss_count": xp.zeros(2, dtype=xp.int32)},
     "miss_src, miss_dst, and miss_count must be provided together."),
    ("plan dtypes", plan(dst_dtype=np.int64), "miss_src must be int64 and miss_dst must be int32."),
    ("count dtype before shape", plan(cols=8, count_dtype=np.int64), "miss_count must be int32."),
    ("single-step plan", plan(cols=8),
     "speculative miss_src/miss_dst must have shape [batch, >= steps * top_k] (capacity 16)."),
    ("plan rows sliced to real batch", plan(batch=1),
     "speculative miss_src/miss_dst must have shape [batch, >= steps * top_k] (capacity 16)."),
    ("count shape", plan(count_shape=(2, 1)), "speculative miss_count must have shape [batch]."),
    ("strides", {**plan(), "miss_dst": wide[:, :16]}, "miss_src/miss_dst row strides must match."),
]


def assert_rejected(kw, changes, match):
    kw = {**kw, **changes}
    before = snapshot(kw)
    for fn in (load_cache_to_device_buffer_spec_mla, load_cache_to_device_buffer_spec_mla_reference):
        args = kw if fn is load_cache_to_device_buffer_spec_mla else \
            {k: (device.to_host(v) if isinstance(v, xp.ndarray) else v) for k, v in kw.items()}
        with pytest.raises(ValueError) as e:
            fn(**args)
        assert match in str(e.value)
    after = snapshot(kw)
    for k in before:
        np.testing.assert_array_equal(before[k], after[k], err_msg=k)


@pytest.mark.parametrize("name,changes,message", CASES, ids=[c[0] for c in CASES])
def test_api_contract_checks_in_order(name, changes, message):
    kw = small()
    kw = {**kw, **changes}
    with pytest.raises(ValueError) as e:
        load_cache_to_device_buffer_spec_mla(**kw)
    assert str(e.value) == message


def test_rejected_calls_write_nothing():
    kw = small()
    assert_rejected(kw, plan(cols=8), "capacity 16")
    assert_rejected(kw, {"seq_lens": xp.zeros(2, dtype=xp.int32)}, "seq_lens must have shape [batch * steps]")


def test_structural_checks():
    kw = small()
    st = kw["state"]
    n = st.scratch_locs.shape[0]
    bad = {
        "hash_size must be a power of two": {"state": st._replace(cache_index=xp.full((n, 2, 24), -1, dtype=xp.int64))},
        "row stride must be even": {"state": st._replace(scratch_state=xp.zeros((n + 1, 81), dtype=xp.int32))},
        "one CLOCK control row": {"state": st._replace(cache_policy=xp.zeros((n, 16), dtype=xp.int32))},
        "seq_lens must have shape [batch * steps]": {"seq_lens": xp.zeros(2, dtype=xp.int32)},
        "req_pool_indices must have dtype int64": {"req_pool_indices": xp.zeros(2, dtype=xp.int32)},
        "top_k_device_locs must have shape [batch, steps, top_k]": {"top_k_device_locs": xp.zeros((2, 16), dtype=xp.int32)},
        "speculative top_k_tokens must have shape [batch, steps, top_k]": {"top_k_tokens": xp.zeros((2, 16), dtype=xp.int32)},
        "The pointers must be multiple of 16 bytes.": {"item_size_bytes": 8},
    }
    for match, changes in bad.items():
        with pytest.raises(ValueError, match=None) as e:
            load_cache_to_device_buffer_spec_mla(**{**kw, **changes})
        assert match in str(e.value), (match, str(e.value))


def test_alloc_miss_plan_is_accepted(spec_version):
    kw = small()
    src, dst, cnt = alloc_miss_plan(2, 2, 8)
    got = run_kernel_and_reference({**kw, "miss_src": src, "miss_dst": dst, "miss_count": cnt},
                                   spec_version)
    assert mismatches(*got) == []


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer_reports_no_errors(tool, spec_version):
    assert_sanitizer_clean(tool, "from hisparse_numba.hisparse.speculative.workloads import sanitizer_workload; "
                                 f"sanitizer_workload(version={spec_version})")