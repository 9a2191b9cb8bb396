"""Lesson 03 (speculative miss_count shape): speculative problems, an unchecked launch path for
the demonstrations, and the exercise checker. Also used by lessons 04, 08 and 13."""

from __future__ import annotations

import numpy as np

from .. import device
from ..device import cuda
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


def launch_unchecked(kw) -> None:
    """Launch the speculative gather + commit kernels WITHOUT ``check_speculative``: the same
    arguments as ``load_cache_to_device_buffer_spec_mla`` passes, for lessons that show what the
    checks prevent. Never use it elsewhere."""
    xp = device.xp
    state = kw["state"]
    batch, steps, top_k = (int(x) for x in kw["top_k_tokens"].shape)
    hot = int(state.cache_policy.shape[1])
    tail = int(kw["device_buffer_tokens"].shape[1]) - hot
    n = int(state.scratch_locs.shape[0])
    record = kw.get("miss_src") is not None
    threads = spec.block_threads(steps * top_k)
    gather, commit = spec._kernels(steps, top_k, hot, threads, record)
    plan = (kw["miss_src"], kw["miss_dst"], kw["miss_count"]) if record else (
        xp.zeros((1, 1), dtype=xp.int64), xp.zeros((1, 1), dtype=xp.int32), xp.zeros(1, dtype=xp.int32))
    scratch_state = cuda.to_device(state.scratch_state) if device.SIMULATOR else state.scratch_state
    item_size_bytes = int(kw["host_cache"].strides[0])
    args = (kw["top_k_tokens"], kw["device_buffer_tokens"], kw["host_cache_locs"], kw["device_buffer_locs"],
            device.byte_words(kw["host_cache"]), device.byte_words(kw["device_buffer"]),
            kw["top_k_device_locs"], kw["req_pool_indices"], kw["seq_lens"], state.cache_index,
            state.cache_policy, state.scratch_locs, scratch_state, scratch_state.view(np.int64),
            kw["num_real_reqs"], *plan, item_size_bytes // 8, tail, n)
    device.launch(gather, batch, threads, *args)
    device.launch(commit, batch, threads, *args)
    if device.SIMULATOR:
        scratch_state.copy_to_host(state.scratch_state)


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
