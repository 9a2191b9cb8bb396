"""Lesson 03 (speculative miss_count shape): speculative problems, an unchecked launch path for
the demonstrations, and the exercise checker. Also used by lessons 04, 08 and 13."""

from __future__ import annotations

import numpy as np

from .. import device
from ..hisparse import speculative as spec
from ..hisparse.miss_plan import alloc_miss_plan
from ..hisparse.spec_examples import make_spec_problem, mismatches, run_kernel_and_reference, set_selection
from .ex05 import _report


def spec_problem(seed: int = 0, *, batch: int = 2, steps: int = 2, top_k: int = 8, hot: int = 16,
                 tail: int = 4, prefix: int = 48, num_real: int | None = None, state_steps=None,
                 record: bool = False):
    """Launcher keywords (device arrays) of a small speculative call with a selection set.

    Row ``b`` step ``s`` has ``seq_len = prefix + s + 1`` and selects ``top_k`` distinct positions
    below ``prefix``: about half hot (``< hot``), the rest host misses; step ``s > 0`` repeats half
    of step 0's positions (cross-step duplicates). ``state_steps`` sizes the state for another
    number of steps than the selection has."""
    rng = np.random.default_rng(seed)
    kw = make_spec_problem(batch=batch, steps=state_steps or steps, top_k=top_k, hot=hot, tail=tail,
                           record=False, seed=seed, max_positions=4 * (hot + steps * top_k) + prefix)
    xp = device.xp
    if (state_steps or steps) != steps:
        kw["top_k_tokens"] = xp.full((batch, steps, top_k), -1, dtype=xp.int32)
        kw["top_k_device_locs"] = xp.full((batch, steps, top_k), -1, dtype=xp.int32)
        kw["seq_lens"] = xp.zeros(batch * steps, dtype=xp.int32)
    tokens = np.zeros((batch, steps, top_k), np.int32)
    for b in range(batch):
        first = np.concatenate([rng.choice(hot, top_k // 2, replace=False),
                                rng.choice(np.arange(hot, prefix), top_k - top_k // 2, replace=False)])
        tokens[b, 0] = rng.permutation(first)
        for s in range(1, steps):
            keep = rng.choice(first, top_k // 2, replace=False)
            rest = rng.choice(np.setdiff1d(np.arange(prefix), keep), top_k - top_k // 2, replace=False)
            tokens[b, s] = rng.permutation(np.concatenate([keep, rest]))
    lens = np.array([[prefix + s + 1 for s in range(steps)] for _ in range(batch)])
    set_selection(kw, tokens, lens, num_real if num_real is not None else batch)
    if record:
        kw["miss_src"], kw["miss_dst"], kw["miss_count"] = alloc_miss_plan(batch, steps, top_k)
    return kw


LAUNCH_KEYWORDS = ("top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs",
                   "host_cache", "device_buffer", "top_k_device_locs", "req_pool_indices",
                   "seq_lens", "state", "num_real_reqs", "miss_src", "miss_dst", "miss_count")


def launch_unchecked(kw) -> None:
    """Launch the speculative swap kernel WITHOUT ``check_speculative``: the same
    arguments as ``load_cache_to_device_buffer_spec_mla`` passes, for lessons that show what the
    checks prevent. Never use it elsewhere."""
    state = kw["state"]
    batch, steps, top_k = (int(x) for x in kw["top_k_tokens"].shape)
    hot = int(state.cache_policy.shape[1])
    cfg = spec.SpecConfig(batch=batch, steps=steps, top_k=top_k, hot=hot,
                          tail=int(kw["device_buffer_tokens"].shape[1]) - hot,
                          num_requests=int(state.scratch_locs.shape[0]),
                          capacity=int(state.scratch_locs.shape[1]),
                          item_size_bytes=int(kw["host_cache"].strides[0]),
                          record=kw.get("miss_src") is not None)
    spec.launch_unchecked(cfg, **{k: kw.get(k) for k in LAUNCH_KEYWORDS})


def run_both(kw):
    """Launcher on ``kw`` and reference on a host copy: ``(got, want)`` snapshots."""
    return run_kernel_and_reference(kw)


def check_count_view(make_count) -> bool:
    """Exercise 03: ``make_count(counts2d)`` turns an old ``[batch, 1]`` int32 counter into the
    ``miss_count`` argument, without a copy (the old code keeps reading ``counts2d``)."""
    kw = spec_problem(3, batch=3)
    batch, steps, top_k = kw["top_k_tokens"].shape
    counts2d = device.xp.full((batch, 1), -5, dtype=device.xp.int32)
    kw["miss_src"], kw["miss_dst"], _ = alloc_miss_plan(batch, steps, top_k)
    try:
        kw["miss_count"] = make_count(counts2d)
        got, want = run_both(kw)
    except ValueError as e:
        return _report(False, "", f"the launcher rejects it: {e}")
    except Exception as e:
        return _report(False, "", f"{type(e).__name__}: {e}")
    if mismatches(got, want):
        return _report(False, "", f"kernel and reference differ in {mismatches(got, want)}")
    seen = device.to_host(counts2d)[:, 0]
    return _report(np.array_equal(seen, want["miss_count"]),
                   f"a [batch] view of the [batch, 1] counter; the old code sees counts {seen.tolist()}",
                   f"the counts did not reach counts2d (it holds {seen.tolist()}): that was a copy")
