"""Seeded random multi-call sequences: kernel == reference and the invariants after every call.

Each sequence mixes hot hits, repeats across steps, fresh misses, unbacked positions (host loc -1),
invalid tokens (-1, >= seq_len), active-tail tokens, padded rows and scratch capacities below
``T - H`` (unresolved overflow), over several calls on the same state.
"""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.speculative import launch, tiling
from hisparse_numba.hisparse.speculative.device_fns import HOLD_WORDS, LANES
from hisparse_numba.hisparse.speculative.examples import (make_spec_problem, mismatches,
                                                   run_kernel_and_reference, set_selection,
                                                   snapshot, wrong_items)
from hisparse_numba.hisparse.speculative.state import initialize_hisparse_spec_state
from tests.conftest import ON_GPU, slow_on_gpu
from hisparse_numba.hisparse.speculative.workloads import owned_locations

xp = device.xp


def random_selection(rng, snap, batch, steps, top_k, hot, tail, seq):
    tokens = np.empty((batch, steps, top_k), dtype=np.int64)
    for b in range(batch):
        rid = int(snap["req_pool_indices"][b])
        resident = snap["device_buffer_tokens"][rid, :hot]
        tail_tokens = snap["device_buffer_tokens"][rid, hot:]
        shared = rng.integers(0, seq, top_k)  # repeated in every step
        for s in range(steps):
            pick = rng.integers(0, 6, top_k)
            row = np.where(pick == 0, rng.choice(resident, top_k), shared)
            row = np.where(pick == 1, rng.integers(0, seq, top_k), row)
            row = np.where(pick == 2, rng.choice(tail_tokens, top_k), row)
            row = np.where(pick == 3, rng.integers(-2, seq + 3, top_k), row)
            tokens[b, s] = row
    return tokens


@slow_on_gpu
@pytest.mark.parametrize("seed", range(4 if not ON_GPU else 10))
def test_random_call_sequences_match_reference(seed, spec_version, monkeypatch):
    # every rung; the tuned one both ways of committing: a committer tile per request (seeds 0,
    # 1, 4, 5, ...), with copier tiles on the odd ones, or the last tile to arrive (seeds 2, 3, ...)
    committer = seed // 2 % 2 == 0
    monkeypatch.setattr(tiling, "committer_tile", lambda batch, tiles: committer)
    monkeypatch.setattr(tiling, "copier_tiles",
                        lambda batch, tiles, has_committer: 2 + seed % 3 if seed % 2 and has_committer else 0)
    rng = np.random.default_rng(seed)
    steps = int(rng.integers(2, 5))
    top_k, hot, tail = (8, 16, 4) if not ON_GPU else (int(rng.choice([512, 2048])), 4096, 64)
    t = steps * top_k
    batch = 2 if not ON_GPU else 8
    cap = int(rng.choice([max(1, t - hot), t, max(1, (t - hot) // 2) if t > hot else t // 2]))
    seq = 3 * (hot + t)
    words = 2 if not ON_GPU else 72
    kw = make_spec_problem(batch=batch, steps=steps, top_k=top_k, hot=hot, tail=tail, item_words=words,
                           scratch_capacity=cap, max_positions=seq, num_requests=batch + 1,
                           host_rows_per_request=hot + t,      # a smaller host pool; rows repeat
                           record=bool(seed % 2), seed=seed)
    if seed == 3:  # a tiny hash: cuckoo inserts fail, lookups fall back to the linear scan
        st = kw["state"]._replace(cache_index=xp.full((batch + 1, 2, 2), -1, dtype=xp.int64))
        kw["state"] = st
        initialize_hisparse_spec_state(device_buffer_tokens=kw["device_buffer_tokens"],
                                       req_pool_indices=xp.arange(batch + 1, dtype=xp.int64), state=st)
        assert (device.to_host(st.scratch_state)[0, 3 * (batch + 1):4 * (batch + 1)] < 0).all()
    hcl = device.to_host(kw["host_cache_locs"])
    hcl[rng.random(hcl.shape) < 0.05] = -1
    kw["host_cache_locs"][...] = xp.asarray(hcl)
    dbt = device.to_host(kw["device_buffer_tokens"])
    for rid in range(dbt.shape[0]):  # tail tokens near the end of the sequence
        dbt[rid, hot:] = seq - 1 - rng.permutation(2 * tail)[:tail]
    kw["device_buffer_tokens"][...] = xp.asarray(dbt)
    for call in range(3 if not ON_GPU else 6):
        snap = snapshot(kw)
        tokens = random_selection(rng, snap, batch, steps, top_k, hot, tail, seq)
        lens = seq - rng.integers(0, 3, batch * steps)
        real = batch - int(rng.integers(0, 2))
        set_selection(kw, tokens, lens, num_real_reqs=real)
        before = snapshot(kw)
        got, want = run_kernel_and_reference(kw, spec_version)
        assert mismatches(got, want) == [], (seed, call)
        assert wrong_items(got, words) == [], (seed, call)
        for rid in range(batch + 1):
            hot_tokens = got["device_buffer_tokens"][rid, :hot]
            hot_tokens = hot_tokens[hot_tokens >= 0]
            assert len(np.unique(hot_tokens)) == len(hot_tokens)
            assert owned_locations(got, rid) == owned_locations(before, rid)


@pytest.mark.parametrize("copiers, warps, item_words", [(1, 1, 2), (3, 1, 2), (7, 1, 2), (3, 3, 2),
                                                       (2, 2, 2 * HOLD_WORDS * LANES + 2)])
def test_copier_tiles_copy_every_listed_miss_once(copiers, warps, item_words, monkeypatch):
    # several tiles per request (two occurrences per thread), a committer tile and copier tiles
    # that split the request's listed misses between them. In the simulator: one-warp tiles (the
    # warp indexes and loads), tiles of several warps (the first indexes, the others load), and
    # items too large for a loader's registers (copied only once numbered)
    monkeypatch.setattr(tiling, "committer_tile", lambda batch, tiles: True)
    monkeypatch.setattr(tiling, "copier_tiles", lambda batch, tiles, committer: copiers)
    if not ON_GPU:
        monkeypatch.setattr(tiling, "tile_threads", lambda num_occurrences: warps * LANES)
    rng = np.random.default_rng(copiers)
    steps, top_k, hot, tail = 4, 64 if not ON_GPU else 2048, 128 if not ON_GPU else 4096, 8
    batch, words = 2, item_words if not ON_GPU or item_words > 2 else 72
    t = steps * top_k
    seq = 3 * (hot + t)
    kw = make_spec_problem(batch=batch, steps=steps, top_k=top_k, hot=hot, tail=tail, item_words=words,
                           scratch_capacity=t, max_positions=seq, record=True, seed=copiers)
    for call in range(2):
        tokens = random_selection(rng, snapshot(kw), batch, steps, top_k, hot, tail, seq)
        set_selection(kw, tokens, np.full(batch * steps, seq), num_real_reqs=batch)
        got, want = run_kernel_and_reference(kw)
        assert mismatches(got, want) == [], call
        assert wrong_items(got, words) == [], call
        assert want["miss_count"][:batch].min() > 0
