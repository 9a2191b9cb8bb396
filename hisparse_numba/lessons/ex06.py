"""Lesson 06 (a partial miss plan): two decode steps and the exercise checker."""

from __future__ import annotations

import numpy as np

from .. import device
from ..hisparse.examples import new_queries, to_host_problem
from .ex05 import PLAN_KEYS, _report, run_both, same, small_problem


def next_step(after, seed: int = 1):
    """The problem of the next decode step, given the (host) problem after a swap-in: the slot
    tables and LRU order carry over, long rows grow by one token and select new positions."""
    p = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in after.items()}
    p.update(miss_src=None, miss_dst=None, miss_count=None)
    rng = np.random.default_rng(seed)
    for _ in range(20):  # a random query can need more non-resident positions than exist
        try:
            q = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in p.items()}
            return new_queries(rng, q, grow=True)
        except ValueError:
            continue
    raise RuntimeError("could not draw a valid next step")


def stale_rows(layer, host_cache, plan, item_size_bytes):
    """Device rows of ``layer`` that do not hold the host item ``plan`` says was copied there.
    ``plan``: a dict with NumPy ``miss_src``, ``miss_dst``, ``miss_count``."""
    rows = device.to_host(layer).reshape(-1, item_size_bytes)
    host = np.asarray(device.to_host(host_cache)).reshape(-1, item_size_bytes)
    bad = []
    for b in range(plan["miss_count"].shape[0]):
        for m in range(int(plan["miss_count"][b])):
            s, d = int(plan["miss_src"][b, m]), int(plan["miss_dst"][b, m])
            if not np.array_equal(rows[d], host[s]):
                bad.append(d)
    return bad


def check_plan_kwargs(plan_kwargs) -> bool:
    """Exercise 06: ``plan_kwargs(batch, num_top_k)`` returns a dict to splat into the launcher
    (``**plan``) that records the same plan as the reference."""
    problem = small_problem(6)
    batch, k = problem["top_k_tokens"].shape
    try:
        plan = dict(plan_kwargs(batch, k))
        extra = set(plan) - set(PLAN_KEYS)
        if extra:
            return _report(False, "", f"the launcher has no keyword {sorted(extra)}")
        args = [plan.get(name) for name in PLAN_KEYS]
        got, want = run_both(problem, *args)
    except ValueError as e:
        return _report(False, "", f"the launcher rejects the plan: {e}")
    except Exception as e:
        return _report(False, "", f"{type(e).__name__}: {e}")
    if any(a is None for a in args):
        return _report(False, "", "the call records no plan: a replay would copy last step's items")
    return _report(same(got, want), "all three plan arrays are passed together and the plan "
                   "matches the reference", "the plan differs from the reference")
