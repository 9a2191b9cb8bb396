"""Builders only the kv-canary tests use (the shared ones live in ``hisparse_numba.kv_canary.examples``)."""

from __future__ import annotations

import numpy as np

from hisparse_numba.kv_canary.examples import PlanProblem, linear_req_to_token, step_inputs


def random_plan_problem(rng, *, max_bs=16, seq_lens=(8, 16, 64, 128, 256),
                        distinct_slots=False) -> PlanProblem:
    """A random valid plan problem (sglang's fuzz axes: bs, width, SWA+LUT kind, sparse table,
    padding, expected-token pool with valid_lens, offset 0/1).

    The ``with_oob`` LUT is cut 0-3 entries short so that the clamp is exercised; the clamp maps
    several raw slots to the last entry, which is fine for the plan but breaks the write kernel's
    precondition (distinct live slots). ``distinct_slots=True`` keeps the LUT full length (same
    random draws), so every (request, position) maps to its own slot or to -1."""
    bs = int(rng.integers(1, max_bs + 1))
    max_seq_len = int(rng.choice(seq_lens))
    max_reqs = bs + 2
    sparse = bool(rng.integers(2))
    if sparse:
        rtt = rng.permutation(max_reqs * max_seq_len).astype(np.int32).reshape(max_reqs, max_seq_len) + 1
        rtt = rtt.astype(np.int32)
    else:
        rtt = linear_req_to_token(max_reqs, max_seq_len)
    rows = rng.permutation(np.arange(1, max_reqs))[:bs].astype(np.int64)
    padding = rng.choice(["none", "trailing", "interleaved"])
    if padding == "trailing":
        rows[bs - int(rng.integers(0, bs)) :] = 0
    elif padding == "interleaved":
        rows[rng.random(bs) < 0.3] = 0
    prefix = rng.integers(0, max_seq_len + 1, size=bs).astype(np.int64)
    extend = np.minimum(rng.integers(0, 5, size=bs), max_seq_len - prefix).astype(np.int64)
    if rng.random() < 0.2:
        extend[:] = 0
    prefix[rows == 0] = rng.integers(0, 100000, size=int((rows == 0).sum()))  # garbage on padding rows
    window, lut = 0, None
    swa = rng.random() < 0.5
    if swa:
        window = int(rng.choice([1, 3, 4, 16, 128]))
    if swa or rng.random() < 0.2:
        n = int(rtt.max()) + 1
        kind = rng.choice(["identity", "shift", "permutation", "with_oob"])
        if kind == "identity":
            lut = np.arange(n, dtype=np.int64)
        elif kind == "shift":
            lut = np.arange(n, dtype=np.int64) + 100
        elif kind == "permutation":
            lut = rng.permutation(n).astype(np.int64)
        else:
            lut = np.arange(n, dtype=np.int64)
            lut[rng.random(n) < 0.2] = -1
            short = int(rng.integers(0, 4))
            if not distinct_slots:
                lut = lut[: max(1, n - short)].copy()  # also exercises the clamp
    pool = valid = None
    offset = int(rng.integers(0, 2))
    if rng.random() < 0.6:
        cols = int(rng.integers(1, max_seq_len + 3))
        pool = rng.integers(0, 50000, size=(max_reqs, cols)).astype(np.int32)
        valid = rng.integers(0, cols + 3, size=bs).astype(np.int64)
    return PlanProblem(rows, prefix, extend, rtt, window, lut, pool, valid, offset,
                       notes={"padding": str(padding), "sparse": sparse})


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
