"""Lesson 05 (miss-plan dtypes): problem helpers and the exercise checker.

The helpers here are shared by the checkers of lessons 05-08: a small single-step swap-in
problem without a plan, and a run of kernel + NumPy reference on the same plan.
"""

from __future__ import annotations

import numpy as np

from .. import device
from ..hisparse.examples import copy_problem, make_swap_in_problem, to_device_problem, to_host_problem
from ..hisparse.swap_in import load_cache_to_device_buffer_mla, load_cache_to_device_buffer_mla_reference

PLAN_KEYS = ("miss_src", "miss_dst", "miss_count")
STATE_KEYS = ("top_k_device_locs", "device_buffer_tokens", "lru_slots", "device_buffer")


def small_problem(seed: int = 0, *, batch: int = 3, num_top_k: int = 8, hot_buffer_size: int = 16,
                  num_real: int | None = None, fast_rows: int = 1):
    """A valid single-step problem (NumPy arrays, no plan): ``batch`` rows, the last real row on
    the fast path, the others on the long path with misses."""
    rng = np.random.default_rng(seed)
    return make_swap_in_problem(rng, batch=batch, num_top_k=num_top_k, hot_buffer_size=hot_buffer_size,
                                num_real=num_real, fast_rows=fast_rows, record_plan=False, block_size=32,
                                max_extra=4 * hot_buffer_size)


def run_both(problem, miss_src, miss_dst, miss_count):
    """Run the kernel (on device copies, with the given plan arrays) and the reference (on NumPy
    copies of them). Returns ``(got, want)``: dicts of NumPy arrays after the call."""
    d = to_device_problem(problem)
    d.update(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)
    want = copy_problem(problem)
    want.update({k: (None if v is None else device.to_host(v))
                 for k, v in zip(PLAN_KEYS, (miss_src, miss_dst, miss_count))})
    load_cache_to_device_buffer_mla_reference(**want)
    load_cache_to_device_buffer_mla(**d)
    device.synchronize()
    return to_host_problem(d), want


def same(got, want, keys=STATE_KEYS + PLAN_KEYS) -> bool:
    """Byte equality of the named arrays."""
    return all(np.array_equal(np.asarray(got[k]).view(np.uint8), np.asarray(want[k]).view(np.uint8))
               for k in keys if want.get(k) is not None)


def _report(ok: bool, right: str, wrong: str) -> bool:
    print(f"right: {right}" if ok else f"wrong: {wrong}")
    return ok


def check_make_plan(make_plan) -> bool:
    """Exercise 05: ``make_plan(batch, num_top_k)`` returns ``(miss_src, miss_dst, miss_count)``
    device arrays that the launcher accepts and that record the same plan as the reference."""
    problem = small_problem(5)
    batch, k = problem["top_k_tokens"].shape
    try:
        plan = make_plan(batch, k)
        miss_src, miss_dst, miss_count = plan
        got, want = run_both(problem, miss_src, miss_dst, miss_count)
    except ValueError as e:
        return _report(False, "", f"the launcher rejects the plan: {e}")
    except Exception as e:  # a learner's bug: report it, do not crash the notebook
        return _report(False, "", f"{type(e).__name__}: {e}")
    return _report(same(got, want), "int64 sources, int32 destinations and int32 counts; the plan "
                   "matches the reference", "the plan differs from the reference")


def live_entries(plan):
    """Per batch row, the recorded ``(src, dst)`` pairs below ``miss_count`` (entries past the
    count are whatever an earlier step left there)."""
    src, dst, cnt = (np.asarray(device.to_host(plan[k])) for k in PLAN_KEYS)
    return [list(zip(src[b, :cnt[b]].tolist(), dst[b, :cnt[b]].tolist())) for b in range(cnt.shape[0])]
