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
from hisparse_numba.hisparse.spec_state import HiSparseSpecState
from hisparse_numba.parity import add_arguments, run
from hisparse_numba.parity.cases import (Sizes, canary_pipeline_case, canary_plan_case,
                                         handoff_case, single_step_case, spec_case)
from hisparse_numba.parity.compare import (Check, duplicate_tokens, handoff_counts, ring_checks,
                                           spec_slot_checks)
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
        from hisparse_numba.hisparse.swap_in import load_cache_to_device_buffer_mla_reference
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
    assert len(cross) == 11 and all(c.ok for c in cross)
    assert Check("x", True).detail == ""


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
