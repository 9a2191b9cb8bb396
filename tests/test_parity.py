"""The parity check against the real sglang (``hisparse_numba.parity``).

``parity``-marked tests run sglang's kernels and are skipped, with the reason, unless sglang
(>= 0.5.23, apache-tvm-ffi, torch) imports on a CUDA machine. The other tests exercise the
comparison and reporting code on every machine with a stand-in for sglang's side that runs the
project's NumPy references (``ReferenceSide``), and with stand-ins that break one thing each, so
that every check is seen to fail when it should.
"""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.speculative.state import HiSparseSpecState
from hisparse_numba.parity import add_arguments, run
from hisparse_numba.parity.cases import (CaseResult, Sizes, canary_plan_case,
                                         handoff_case, sglang_scan_problem, single_step_case, spec_case)
from hisparse_numba.parity.command import report
from hisparse_numba.parity.compare import (Check, duplicate_tokens, exclude_unstable, handoff_counts,
                                           ring_checks, spec_slot_checks, union_victims)
from hisparse_numba.parity.sides import OursSide, sglang_unavailable_reason

SMALL = Sizes.small()


def _host(kw):
    out = {}
    for k, v in kw.items():
        if isinstance(v, HiSparseSpecState):
            out[k] = HiSparseSpecState(*(device.to_host(a) for a in v))
        elif isinstance(v, (int, bool, np.integer)) or v is None:
            out[k] = v
        elif k == "host_cache":
            out[k] = np.asarray(v)
        else:
            out[k] = device.to_host(v)
    return out


def _write_back(kw, host):
    for k, v in host.items():
        if isinstance(v, HiSparseSpecState):
            for d, s in zip(kw[k], v):
                d[...] = device.to_device(s) if not isinstance(d, np.ndarray) else s
        elif isinstance(v, np.ndarray) and k != "host_cache":
            kw[k][...] = device.to_device(v) if not isinstance(kw[k], np.ndarray) else v


class ReferenceSide(OursSide):
    """Stands in for sglang: the project's NumPy references on host copies, written back."""

    name = "reference stand-in"
    version = "0"

    def swap_in(self, p):
        from hisparse_numba.hisparse.single_step import load_cache_to_device_buffer_mla_reference
        h = _host(p)
        load_cache_to_device_buffer_mla_reference(**h)
        _write_back(p, h)

    def spec(self, kw):
        from hisparse_numba.hisparse.speculative import load_cache_to_device_buffer_spec_mla_reference
        h = _host(kw)
        load_cache_to_device_buffer_spec_mla_reference(**h)
        _write_back(kw, h)


class RaceSide(ReferenceSide):
    """Like sglang's atomic numbering: after the call, the hot slots of two tokens that missed
    trade places (tokens, locations, epochs, the hash entries and every output follow), so the
    result is as valid as before but not byte-identical."""

    name = "racing stand-in"

    def spec(self, kw):
        before = device.to_host(kw["device_buffer_tokens"]).copy()
        super().spec(kw)
        h = _host(kw)
        hot = h["state"].cache_policy.shape[1]
        rid = int(h["req_pool_indices"][0])
        dbt, dbl = h["device_buffer_tokens"][rid], h["device_buffer_locs"][rid]
        new = [s for s in range(hot) if dbt[s] >= 0 and dbt[s] not in set(before[rid, :hot].tolist())]
        if len(new) < 2:
            return
        s1, s2 = new[0], new[1]
        t1, t2 = int(dbt[s1]), int(dbt[s2])
        dbt[s1], dbt[s2] = t2, t1
        dbl[s1], dbl[s2] = dbl[s2], dbl[s1]
        pol = h["state"].cache_policy[rid + 1]
        pol[s1], pol[s2] = pol[s2], pol[s1]
        banks = h["state"].cache_index[rid]
        for (s, t), new_s in (((s1, t1), s2), ((s2, t2), s1)):
            banks[banks == ((s << 32) | t)] = (new_s << 32) | t
        _write_back(kw, h)


class BrokenSide(ReferenceSide):
    """A stand-in with a real defect: a second copy of a resident token in an extra hot slot,
    one wrong hit output, and a canary write that drops the last slot."""

    name = "broken stand-in"

    def spec(self, kw):
        super().spec(kw)
        h = _host(kw)
        rid = int(h["req_pool_indices"][0])
        hot = h["state"].cache_policy.shape[1]
        h["device_buffer_tokens"][rid, hot - 1] = h["device_buffer_tokens"][rid, 0]
        h["top_k_device_locs"][0, 0, 0] += 1
        _write_back(kw, h)


@pytest.fixture(scope="module")
def ref_side():
    return ReferenceSide()


def test_single_step_equal_byte_for_byte(ref_side):
    r = single_step_case(OursSide(), ref_side, SMALL, seed=3)
    assert r.ok, [c for c in r.checks if not c.ok]
    assert len(r.checks) > 10


@pytest.mark.parametrize("regime", list(SMALL.regimes))
def test_spec_regimes_equal(ref_side, regime):
    r = spec_case(OursSide(), ref_side, SMALL, regime, seed=5)
    assert r.ok, [c for c in r.checks if not c.ok]
    assert "byte-identical" in r.notes[-1]


def test_spec_race_is_equal_at_slot_level_only():
    r = spec_case(ReferenceSide(), RaceSide(), SMALL, "union, few misses", seed=5)
    assert r.ok, [c for c in r.checks if not c.ok]
    assert "differing: none" not in r.notes[1]     # yet not byte-identical


def test_spec_defects_are_reported():
    r = spec_case(ReferenceSide(), BrokenSide(), SMALL, "union, few misses", seed=5)
    failed = {c.name for c in r.checks if not c.ok}
    assert "hit outputs (exact)" in failed
    assert "sglang: no token held twice" in failed
    assert "sglang: every output holds its token's item" in failed


def test_handoff_counts_zero_between_equal_sides(ref_side):
    r = handoff_case(OursSide(), ref_side, SMALL, seed=7)
    assert r.ok, [c for c in r.checks if not c.ok]
    assert len(r.checks) == 4


def test_handoff_counts_remissed_and_duplicates():
    hot = 4
    first = {"state.cache_policy": np.zeros((2, hot), np.int32),
             "device_buffer_tokens": np.array([[10, 11, 12, 13, -1]], np.int32)}
    second = {"state.cache_policy": np.zeros((2, hot), np.int32),
              "device_buffer_tokens": np.array([[10, 11, 12, 12, -1]], np.int32),
              "num_real_reqs": np.array([1], np.int32), "req_pool_indices": np.array([0]),
              "top_k_tokens": np.array([[[11, 12, 20]]], np.int32),
              "host_cache_locs": np.arange(32, dtype=np.int64)[None] + 100,
              "miss_count": np.array([2], np.int32),
              "miss_src": np.array([[112, 120, 0]], np.int64)}
    assert handoff_counts(first, second) == (1, 1)
    assert duplicate_tokens(np.array([1, 1, 1, -1, -1])) == 2


def test_canary_plan_equal(ref_side):
    r = canary_plan_case(OursSide(), ref_side, seed=11, problems=3)
    assert r.ok, [c for c in r.checks if not c.ok]


def test_ring_checks_ignore_row_order_only():
    ring = np.arange(12, dtype=np.int64).reshape(4, 3)
    a = {"canary_buf": np.zeros((2, 32), np.uint8), "violation_ring": ring,
         "violation_write_index": np.array([2], np.int32), "slot_run_counter": np.array([5]),
         "kernel_run_counter": np.array([1])}
    b = dict(a, violation_ring=ring[[1, 0, 2, 3]])
    assert all(c.ok for c in ring_checks(a, b))
    c = dict(a, violation_ring=ring[[2, 1, 0, 3]])
    assert not all(x.ok for x in ring_checks(a, c))


def test_command_reports_and_exit_codes(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "parity.md"
    args = parser.parse_args(["--small", "--plan-problems", "2", "--out", str(out)])
    assert run(args, theirs=ReferenceSide()) == 0
    text = out.read_text()
    assert "| single-step swap-in (load_cache_to_device_buffer_mla) | byte for byte | equal" in text
    assert "Not compared exactly, and why:" in text
    assert run(args, theirs=BrokenSide()) == 1
    assert "Failing checks:" in capsys.readouterr().out


def test_command_without_sglang_says_why(capsys):
    if sglang_unavailable_reason() is None:
        pytest.skip("sglang is usable here")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run(parser.parse_args(["--small"])) == 2
    assert "not usable here" in capsys.readouterr().out


def test_slot_checks_pass_on_identical_snapshots():
    from hisparse_numba.parity.cases import snap, spec_problem
    kw = spec_problem(SMALL, None, 0)
    s = snap(kw)
    cross = [c for c in spec_slot_checks(s, s, s, SMALL.item_words) if ":" not in c.name]
    assert len(cross) == 14 and all(c.ok for c in cross)
    assert Check("x", True).detail == ""


def _fallback_problem():
    """H 64, fresh state, 2 steps: the odd hot slots are hit, tokens 100 and 101 miss (union mode).
    Miss 0 samples even positions (slot 0 wins, first of equal ages); miss 1 samples positions
    1, 11, 21, 33, 43, 53, all hit, so it goes to the fallback: ours takes the next free slot
    in ring order (2), sglang probes cursor + (1 + a) * 2654435761 mod 64 = 49, 34, ... (34)."""
    from hisparse_numba.hisparse.speculative.examples import make_spec_problem, set_selection, snapshot
    kw = make_spec_problem(batch=1, steps=2, top_k=34, hot=64, tail=0, max_positions=512, seed=0)
    sel = np.array(list(range(1, 64, 2)) + [100, 101], np.int32)
    set_selection(kw, np.stack([sel, sel])[None], np.array([512, 512]))
    return kw, snapshot(kw)


def test_union_victims_split_sampled_and_fallback():
    kw, before = _fallback_problem()
    plan = union_victims(before, 0)
    assert plan.union_mode and plan.misses == 2
    assert plan.sampled == {0} and plan.fallback == 1


def test_fallback_difference_is_named_once():
    """A side whose fallback took slot 2 (ring order) instead of 34 (sglang's hash order, which
    ours follows) fails only the fallback check."""
    from hisparse_numba.hisparse.speculative.examples import snapshot
    kw, before = _fallback_problem()
    ReferenceSide().spec(kw)
    ours = snapshot(kw)
    evicted = ours["device_buffer_tokens"][0, :64] != before["device_buffer_tokens"][0, :64]
    assert np.flatnonzero(evicted).tolist() == [0, 34]
    theirs = {k: v.copy() for k, v in ours.items()}
    dbt, dbl = theirs["device_buffer_tokens"][0], theirs["device_buffer_locs"][0]
    scratch = theirs["state.scratch_locs"][0]
    dbt[2], dbl[2] = dbt[34], dbl[34]
    dbt[34], dbl[34] = before["device_buffer_tokens"][0, 34], before["device_buffer_locs"][0, 34]
    scratch[scratch == before["device_buffer_locs"][0, 34]] = before["device_buffer_locs"][0, 2]
    failed = {c.name: c.detail for c in spec_slot_checks(ours, theirs, before, 2, cross_only=True) if not c.ok}
    assert failed == {"union-mode victims found by the fallback (set per request)":
                      "1 requests differ: 1 only ours, 1 only sglang"}


def test_exclude_unstable_sets_aside_only_what_sglang_does_not_determine():
    checks = [Check("a", False, "x"), Check("b", False, "y"), Check("c", True)]
    out = exclude_unstable(checks, [Check("a", False, "z"), Check("c", False, "w")])
    assert out[0].ok and "z" in out[0].excluded
    assert not out[1].ok and not out[1].excluded
    assert out[2] == checks[2]
    text = report([CaseResult("case", "slot level", out)], [], "header")
    assert "DIFFERENT (1 of 2 checks fail; 1 set aside)" in text
    assert "| case | a | z |" in text


def test_sglang_scan_problem_block_sizes():
    assert sglang_scan_problem(256, 2048, 4096)          # run 2's illegal memory access
    assert sglang_scan_problem(960, 2048, 4096) is None
    assert sglang_scan_problem(512, 2048, 4096) is None
    assert sglang_scan_problem(256, 256, 512) is None      # 16 chunks <= 2 * 8 warps
    big = Sizes.gpu()
    assert sglang_scan_problem(big.block_size, big.single_top_k, big.single_hot) is None
    assert sglang_scan_problem(SMALL.block_size, SMALL.single_top_k, SMALL.single_hot) is None


_REASON = sglang_unavailable_reason()


@pytest.mark.parity
@pytest.mark.gpu
@pytest.mark.skipif(_REASON is not None, reason=f"sglang's kernels not usable: {_REASON}")
def test_parity_against_sglang(capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    code = run(parser.parse_args(["--no-timing"]))
    text = capsys.readouterr().out
    assert code == 0, text
