"""Victim choice and the bank-1 hash, as sglang computes them (docs/speculative-swap-in.md).

Hand cases with worked numbers for union-mode sampling, approximate-mode walks (including two
misses that want the same slot) and the bank-1 finaliser; the swap cases also check kernel ==
reference on every output and state array, for every rung of the kernel.
"""

import numpy as np

from hisparse_numba import device
from hisparse_numba.hisparse.speculative.examples import (make_spec_problem, mismatches,
                                                   run_kernel_and_reference, set_selection,
                                                   wrong_items)
from hisparse_numba.hisparse.speculative.hash import h0, h1
from hisparse_numba.hisparse.speculative.state import approximate_candidate, cursor_bits, pack_clock
from hisparse_numba.hisparse.speculative import union_sample_positions

xp = device.xp


def finaliser(token):
    """sglang's bank-1 hash written out in Python integers (uint32 after every step)."""
    h = token & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x7FEB352D) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 0x846CA68B) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def test_bank1_hash_is_sglangs_finaliser():
    # by hand for token 1: 1 -> 0x7FEB352D -> ^ (>> 15 = 0xFFD6) = 0x7FEBCAFB -> * 0x846CA68B
    assert (0x7FEB352D ^ (0x7FEB352D >> 15)) == 0x7FEBCAFB
    assert int(h1(1, 0xFFFFFFFF)) == 0x688990C0
    assert int(h1(123456, 8191)) == 4544
    assert int(h1(2**31 - 1, 0xFFFFFFFF)) == 0x8D29FFB8
    tokens = np.random.default_rng(7).integers(0, 2**31, 2000)
    for token in [0, 2, 3, 4095, 65535, 65536, 1048647, *tokens.tolist()]:
        assert int(h1(token, 0xFFFFFFFF)) == finaliser(token)
        assert int(h1(np.int32(token), 8191)) == finaliser(token) & 8191
    assert int(h0(1, 8191)) == 2654435761 & 8191


def test_union_samples_spread_over_the_partition():
    # H 4096, 300 unique misses, miss 0: partition_size 14, offsets 0, 2, 4, 7, 9, 11
    assert union_sample_positions(0, 300, 4096) == [0, 600, 1200, 2100, 2700, 3300]
    assert union_sample_positions(299, 300, 4096) == [299, 899, 1499, 2099, 2699, 3299]
    # with at least H / 6 misses the samples are the first six positions of the partition
    assert union_sample_positions(5, 700, 4096) == [5 + j * 700 for j in range(6)]
    assert union_sample_positions(3, 4000, 4096) == [3, 4003]
    assert union_sample_positions(100, 4000, 4096) == [100]


def test_approximate_candidates_follow_the_knuth_walk():
    assert approximate_candidate(0, 7, 24) == 7
    assert approximate_candidate(5, 7, 24) == ((5 * 2654435761 + 7) & 0xFFFFFFFF) % 24
    assert approximate_candidate(3, 0xFFFFFF, 4096) == ((3 * 2654435761 + 0xFFFFFF) & 0xFFFFFFFF) % 4096


def hot_tokens(snap, hot):
    rid = int(snap["req_pool_indices"][0])
    return snap["device_buffer_tokens"][rid, :hot].tolist(), rid


def run_checked(kw, version, item_words=2):
    got, want = run_kernel_and_reference(kw, version)
    assert mismatches(got, want) == []
    assert wrong_items(got, item_words) == []
    return got


def test_union_mode_takes_the_oldest_spread_sample(spec_version):
    hot, steps, top_k = 32, 2, 16
    kw = make_spec_problem(batch=1, steps=steps, top_k=top_k, hot=hot, tail=4)
    rid = int(device.to_host(kw["req_pool_indices"])[0])
    policy = device.to_host(kw["state"].cache_policy)
    # call epoch E = 6, cursor 2; every slot has age 1 except a few older ones
    policy[0, rid] = pack_clock(5, 2, cursor_bits(hot))
    policy[rid + 1, :] = 5
    policy[rid + 1, [23, 30, 28]] = [1, 2, 3]     # ages 5, 4, 3
    policy[rid + 1, 22] = 6                       # stamped E already: never a victim
    kw["state"].cache_policy[...] = xp.asarray(policy)
    misses = [200, 201, 202]                      # unique_idx 0, 1, 2 (3 unique misses)
    row = misses + [-1] * (top_k - 3)
    set_selection(kw, np.array([[row, row]]), np.full(steps, 256))
    # miss 0 samples ring positions 0 3 9 15 21 27 -> slots 2 5 11 17 23 29: 23 is oldest
    # miss 1: 1 4 10 16 22 28 -> slots 3 6 12 18 24 30: 30; miss 2 (partition 10):
    # 2 5 11 17 20 26 -> slots 4 7 13 19 22 28: 22 is stamped, 28 is oldest
    assert union_sample_positions(2, 3, hot) == [2, 5, 11, 17, 20, 26]
    got = run_checked(kw, spec_version)
    tokens, _ = hot_tokens(got, hot)
    assert (tokens[23], tokens[30], tokens[28]) == (200, 201, 202)
    # the first six positions of each partition (the simplified sampling) miss all three
    assert not {23 - 2, 30 - 2, 28 - 2} & {i + 3 * j for i in range(3) for j in range(6)}


def test_approximate_mode_walks_and_settles_a_shared_slot(spec_version):
    hot, steps, top_k = 16, 2, 16
    kw = make_spec_problem(batch=1, steps=steps, top_k=top_k, hot=hot, tail=4, scratch_capacity=2,
                           max_positions=192)
    # step 0: 15 unique misses 100..114 and hot token 4; last step: 100, 101 and hot tokens 4, 5.
    # 15 misses + 2 hit slots > 16: approximate mode with overflow (cap 2); refs are kept,
    # budget = 16 - 2 - 13 = 1: of the claimed 100 (u 0) and 101 (u 1) only 100 is admitted.
    step0 = list(range(100, 115)) + [4]
    step1 = [100, 101, 4, 5] + [-1] * 12
    set_selection(kw, np.array([[step0, step1]]), np.full(steps, 192))
    # E = 1, cursor 0; with H = 16, candidate(linear) = (linear + 1) % 16. Walks: u 0 -> [0];
    # direct-overflow u >= 2 -> [u - 2, u - 2 + 13 if < 16]. Round 1: u 0 and u 2 both propose
    # slot 1 (u 0 wins); u 5, u 6 reach stamped slots 4, 5 and their walks end; the others take
    # slot u - 1. Round 2: u 2 goes on to linear 13 -> slot 14. Fallback in Knuth-hash order from
    # cursor + u * 2654435761 (= u + a mod 16 here): u 5 -> 5, 6, ... -> 15; u 6 -> 6, ... -> 0.
    assert [approximate_candidate(x, 1, hot) for x in (0, 13, 3, 4)] == [1, 14, 4, 5]
    got = run_checked(kw, spec_version)
    tokens, rid = hot_tokens(got, hot)
    assert tokens == [106, 100, 103, 104, 4, 5, 107, 108, 109, 110, 111, 112, 113, 114, 102, 105]
    assert got["state.scratch_state"][0, rid] == 15


def test_union_fallback_probes_in_knuth_hash_order(spec_version):
    hot, steps, top_k = 64, 2, 34
    kw = make_spec_problem(batch=1, steps=steps, top_k=top_k, hot=hot, tail=0, max_positions=512)
    # the odd slots are hit (E = 1, cursor 0); misses 100 and 101 (u 0, 1), union mode (2 + 32 <= 64).
    # u 0 samples positions 0 10 20 32 42 52: all unstamped, equal ages, the first (slot 0) wins.
    # u 1 samples 1 11 21 33 43 53: all hit -> fallback from (0 + 1 * 2654435761) mod 2^32 mod 64
    # = 49 (hit), then 49 + 49 = 98 -> 34: slot 34 (ring order from the cursor would give slot 2).
    row = list(range(1, 64, 2)) + [100, 101]
    set_selection(kw, np.array([[row, row]]), np.full(steps, 512))
    got = run_checked(kw, spec_version)
    tokens, _ = hot_tokens(got, hot)
    evicted = [s for s in range(hot) if tokens[s] != s]
    assert evicted == [0, 34]
    assert {tokens[0], tokens[34]} == {100, 101}


def test_union_misses_over_one_commit_chunk(spec_version):
    """600 misses: the commit takes them 512 at a time; the second chunk's samples see the
    first chunk's fallback stamps (kernel == reference on every array)."""
    hot, steps, top_k = 1024, 2, 512
    kw = make_spec_problem(batch=1, steps=steps, top_k=top_k, hot=hot, tail=0, max_positions=4096)
    rng = np.random.default_rng(3)
    hits = rng.choice(hot, 300, replace=False)
    misses = rng.choice(np.arange(hot, 4096), 600, replace=False)
    step0 = np.concatenate([misses[:300], hits[:212]])
    step1 = np.concatenate([misses[300:], hits[212:], hits[:124]])
    set_selection(kw, np.array([[rng.permutation(step0), rng.permutation(step1)]]), np.full(steps, 4096))
    got = run_checked(kw, spec_version)
    assert got["state.scratch_state"][0, 0] == 600
