"""Builders only the kv-canary tests use (the shared ones live in ``hisparse_numba.kv_canary.examples``)."""

from __future__ import annotations

import numpy as np

from hisparse_numba.kv_canary.examples import PlanProblem, random_plan_problem, step_inputs  # noqa: F401


def check_write_slots_distinct(problem: PlanProblem) -> None:
    """Assert the write kernel's precondition for ``problem``'s step: live write slots (>= 0) are
    pairwise distinct and none is a row's seed slot (see ``write``'s module docstring)."""
    loc = step_inputs(problem, np.zeros(problem.req_to_token.shape, np.int64))["out_cache_loc"]
    live = loc[loc >= 0]
    uniq, counts = np.unique(live, return_counts=True)
    assert np.all(counts == 1), f"slots written more than once in one launch: {uniq[counts > 1][:8]}"
    lut, width = problem.full_to_swa_index_mapping, problem.req_to_token.shape[1]
    for rp, prefix, extend in zip(problem.req_pool_indices, problem.prefix_lens, problem.extend_seq_lens):
        if rp != 0 and prefix > 0 and extend > 0:
            raw = int(problem.req_to_token[rp, min(int(prefix) - 1, width - 1)])
            seed = raw if lut is None or raw < 0 else int(lut[min(raw, lut.shape[0] - 1)])
            assert seed < 0 or seed not in set(live.tolist()), f"seed slot {seed} is written in the same launch"
