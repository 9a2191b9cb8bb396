"""Builders of valid speculative swap-in problems (tests, lessons 01, 03, 04, 08, benchmark, compile check).

The layout follows sglang's kernel tests: request ``rid`` owns the physical device locations
``[rid * P, (rid + 1) * P)`` with ``P = H + tail + capacity`` (H hot slots, then the active tail,
then its scratch landing zone); hot slot ``s`` initially holds token ``s`` with its item loaded;
position ``pos`` of request ``rid`` lives in host row ``rid * R + pos % R`` (each request on its own
host rows), and host item ``h`` holds the int64 words ``h * 1000003 + w``.
"""

from __future__ import annotations

import numpy as np

from ... import device
from ..miss_plan import alloc_miss_plan
from .state import (HiSparseSpecState, default_scratch_capacity,
                         initialize_hisparse_spec_state, make_hisparse_spec_state)

ITEM_MULTIPLIER = 1_000_003


def host_item_words(host_rows, item_words: int) -> np.ndarray:
    """The int64 words of the given host rows: ``[len, item_words]``."""
    rows = np.asarray(host_rows, dtype=np.int64).reshape(-1, 1)
    return rows * ITEM_MULTIPLIER + np.arange(item_words, dtype=np.int64)


def make_spec_problem(*, batch, steps, top_k, hot, tail, item_words=2, scratch_capacity=None,
                      max_positions=None, host_rows_per_request=None, num_requests=None,
                      record=False, seed=0):
    """Launcher keywords (device arrays) for a fresh problem; the selection is all -1.

    Set ``top_k_tokens`` / ``seq_lens`` with :func:`set_selection`. ``req_pool_indices`` is a
    permutation of the first ``batch`` request slots (so row b and slot rid differ).
    """
    n = int(num_requests or batch)
    t = steps * top_k
    cap = default_scratch_capacity(hot, steps, top_k) if scratch_capacity is None else scratch_capacity
    max_positions = int(max_positions or 4 * (hot + t))
    rows = int(host_rows_per_request or max_positions)
    per_req = hot + tail + cap
    xp = device.xp

    host_cache = device.host_cache_array((n * rows, item_words), np.int64)
    host_cache[...] = host_item_words(np.arange(n * rows), item_words)
    pos = np.arange(max_positions, dtype=np.int64)
    hcl = np.stack([rid * rows + pos % rows for rid in range(n)]).astype(np.int64)
    dev = np.zeros((n * per_req, item_words), dtype=np.int64)
    dbt = np.full((n, hot + tail), -1, dtype=np.int32)
    dbl = np.full((n, hot + tail), -1, dtype=np.int32)
    scratch = np.full((n, cap), -1, dtype=np.int32)
    for rid in range(n):
        base = rid * per_req
        dbt[rid, :hot] = np.arange(hot)
        dbl[rid, :hot + tail] = base + np.arange(hot + tail)
        scratch[rid] = base + hot + tail + np.arange(cap)
        dev[base:base + hot] = host_item_words(hcl[rid, :hot], item_words)
    state = make_hisparse_spec_state(n, hot, steps, top_k, scratch_capacity=cap)
    state.scratch_locs[...] = xp.asarray(scratch)
    rpi = np.random.default_rng(seed).permutation(n)[:batch].astype(np.int64)
    kw = dict(
        top_k_tokens=xp.full((batch, steps, top_k), -1, dtype=xp.int32),
        device_buffer_tokens=device.to_device(dbt),
        host_cache_locs=device.to_device(hcl),
        device_buffer_locs=device.to_device(dbl),
        host_cache=host_cache,
        device_buffer=device.to_device(dev),
        top_k_device_locs=xp.full((batch, steps, top_k), -1, dtype=xp.int32),
        req_pool_indices=device.to_device(rpi),
        seq_lens=xp.zeros(batch * steps, dtype=xp.int32),
        state=state,
        num_real_reqs=device.to_device(np.array([batch], dtype=np.int32)),
    )
    initialize_hisparse_spec_state(device_buffer_tokens=kw["device_buffer_tokens"],
                                   req_pool_indices=device.to_device(np.arange(n, dtype=np.int64)),
                                   state=state)
    if record:
        kw["miss_src"], kw["miss_dst"], kw["miss_count"] = alloc_miss_plan(batch, steps, top_k)
    return kw


def set_selection(kw, top_k_tokens, seq_lens, num_real_reqs=None) -> None:
    """Write a selection ``[batch, steps, top_k]`` and per-step lengths ``[batch * steps]``."""
    kw["top_k_tokens"][...] = device.xp.asarray(np.asarray(top_k_tokens, dtype=np.int32))
    kw["seq_lens"][...] = device.xp.asarray(np.asarray(seq_lens, dtype=np.int32).reshape(-1))
    if num_real_reqs is not None:
        kw["num_real_reqs"][...] = device.xp.asarray(np.array([num_real_reqs], dtype=np.int32))


def host_copy(kw) -> dict:
    """NumPy copies of every array (the state too), for the reference.

    ``host_cache`` is passed as it is, not copied: it is host memory already, and neither the
    kernel nor the reference writes it (at sglang's sizes a copy costs seconds per call).
    """
    out = {}
    for k, v in kw.items():
        if isinstance(v, HiSparseSpecState):
            out[k] = HiSparseSpecState(*(device.to_host(a) for a in v))
        elif k == "host_cache" or not hasattr(v, "shape"):
            out[k] = v
        else:
            out[k] = device.to_host(v)
    return out


def snapshot(kw) -> dict:
    """Flat NumPy copies of every array the call may write, keyed by name (state fields as
    ``state.<field>``); ``host_cache``, which no call writes, is left out."""
    flat = {}
    for k, v in host_copy(kw).items():
        if isinstance(v, HiSparseSpecState):
            for f, a in zip(v._fields, v):
                flat[f"state.{f}"] = a
        elif isinstance(v, np.ndarray) and k != "host_cache":
            flat[k] = v
    return flat


def run_kernel_and_reference(kw, version=None) -> tuple:
    """Run the launcher (rung ``version``, default the tuned one) on ``kw`` and the reference on a
    host copy; return both snapshots."""
    from . import (load_cache_to_device_buffer_spec_mla,
                              load_cache_to_device_buffer_spec_mla_reference)

    ref = host_copy(kw)
    load_cache_to_device_buffer_spec_mla(**kw, version=version)
    load_cache_to_device_buffer_spec_mla_reference(**ref)
    device.synchronize()
    return snapshot(kw), snapshot(ref)


def mismatches(got: dict, want: dict) -> list:
    """Names of the arrays that differ between two snapshots."""
    return [k for k in want if not np.array_equal(got[k], want[k])]


def wrong_items(snap: dict, item_words: int, *, tail_ok=True) -> list:
    """Occurrences ``(b, step, k)`` whose output location does not hold the selected token's item.

    Checks every real row's occurrence with a valid token and an output >= 0; occurrences served
    by the active tail (no host copy) are skipped when ``tail_ok``.
    """
    bad = []
    out, tok, hcl = snap["top_k_device_locs"], snap["top_k_tokens"], snap["host_cache_locs"]
    dev = snap["device_buffer"].reshape(-1, item_words)
    hot = snap["state.cache_policy"].shape[1]
    real = int(snap["num_real_reqs"][0])
    batch, steps, _ = out.shape
    for b in range(min(real, batch)):
        rid = int(snap["req_pool_indices"][b])
        tail_tokens = set(snap["device_buffer_tokens"][rid, hot:].tolist())
        for s in range(steps):
            for k in np.flatnonzero(out[b, s] >= 0):
                t = int(tok[b, s, k])
                if (tail_ok and t in tail_tokens) or hcl[rid, t] < 0:
                    continue  # served from the tail, or no host copy to compare with
                if not np.array_equal(dev[out[b, s, k]], host_item_words([hcl[rid, t]], item_words)[0]):
                    bad.append((b, s, int(k)))
    return bad


def compile_examples() -> None:
    """Call every launcher of this family once on small valid inputs (with and without a plan),
    on every rung of the swap-in (``versions.VERSIONS``)."""
    from . import load_cache_to_device_buffer_spec_mla
    from .versions import VERSIONS

    for version in sorted(VERSIONS):
        for record in (False, True):
            kw = make_spec_problem(batch=2, steps=2, top_k=16, hot=16, tail=4, item_words=2,
                                   record=record, max_positions=256)
            tokens = np.arange(2 * 2 * 16, dtype=np.int32).reshape(2, 2, 16) * 3
            set_selection(kw, tokens, np.full(4, 200))
            load_cache_to_device_buffer_spec_mla(**kw, version=version)
    device.synchronize()


if __name__ == "__main__":
    compile_examples()
    print("compiled")
