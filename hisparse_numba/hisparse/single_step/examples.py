"""Valid single-step swap-in problems: builders shared by tests, benchmarks and lessons.

A *problem* is a dict of NumPy arrays and scalars named after the keyword arguments of
``load_cache_to_device_buffer_mla``, so ``reference(**problem)`` runs the oracle in place and
``launcher(**to_device_problem(problem))`` runs the kernel on device copies.

Every request row owns its own host rows (``rid * max_seq + position``) and its own device rows
(a shuffled block of ``H + 1`` rows), so plans of different rows never overlap.
(The speculative builders live in ``speculative/examples.py``.)
"""

from __future__ import annotations

import numpy as np

from ... import device

ARRAY_KEYS = ("top_k_tokens", "device_buffer_tokens", "host_cache_locs", "device_buffer_locs",
              "host_cache", "device_buffer", "top_k_device_locs", "req_pool_indices", "seq_lens",
              "lru_slots", "num_real_reqs", "miss_src", "miss_dst", "miss_count")


def make_swap_in_problem(rng, *, batch=3, num_top_k=8, hot_buffer_size=16, item_size_bytes=32,
                         num_requests=None, max_extra=None, fast_rows=1, num_real=None,
                         page_size=1, record_plan=True, resident_fraction=0.8,
                         hit_fraction=0.5, newest_probability=0.5, unbacked_fraction=0.2,
                         index_dtype=np.int32, block_size=32):
    """A random valid problem.

    The last ``fast_rows`` real rows take the fast path (``seq_len <= H``); the others have
    ``seq_len`` in ``(H, H + max_extra]``, random resident tags (``resident_fraction`` of the
    slots, the rest ``-1``), a random LRU permutation, and some resident positions without a
    host copy (``unbacked_fraction``; they can be hits, never misses). Rows ``>= num_real`` are
    padding. The query of each long row: about ``hit_fraction`` of the lanes resident, the newest
    position with ``newest_probability``, the rest backed non-resident positions.
    """
    K, H = int(num_top_k), int(hot_buffer_size)
    R = int(num_requests or batch + 1)
    extra = int(max_extra or 2 * H)
    max_seq = H + extra
    num_real = batch if num_real is None else int(num_real)
    width = H + int(page_size)
    rids = rng.permutation(R)[:batch].astype(np.int64)

    tags = np.full((R, width), -1, np.int32)
    locs = np.full((R, width), -1, np.int32)
    lru = np.tile(np.arange(H, dtype=np.int16), (R, 1))
    host_locs = np.full((R, max_seq), -1, np.int64)
    seq_lens = np.zeros(batch, np.int64)
    for r in range(R):
        locs[r, :H + 1] = r * (H + 1) + rng.permutation(H + 1)
        host_locs[r] = r * max_seq + np.arange(max_seq)
    for b in range(batch):
        fast = num_real - fast_rows <= b < num_real
        seq_lens[b] = rng.integers(1, H + 1) if fast else rng.integers(H + 1, max_seq + 1)
    for b in range(batch):
        r, seq_len = rids[b], int(seq_lens[b])
        if seq_len <= H:
            tags[r, :H] = np.arange(H)
            continue
        lru[r] = rng.permutation(H).astype(np.int16)
        n_res = int(round(resident_fraction * H))
        resident = rng.choice(seq_len - 1, size=min(n_res, seq_len - 1), replace=False)
        slots = rng.choice(H, size=resident.size, replace=False)
        tags[r, slots] = resident
        unbacked = rng.choice(resident, size=int(unbacked_fraction * resident.size), replace=False)
        host_locs[r, unbacked] = -1
        host_locs[r, seq_len - 1] = -1          # the newest token is not backed up yet

    problem = dict(
        device_buffer_tokens=tags, host_cache_locs=host_locs, device_buffer_locs=locs,
        req_pool_indices=rids.astype(index_dtype), seq_lens=seq_lens.astype(index_dtype),
        lru_slots=lru, item_size_bytes=int(item_size_bytes), num_top_k=K, hot_buffer_size=H,
        page_size=int(page_size), block_size=int(block_size),
        num_real_reqs=np.array([num_real], np.int32), skip_io=False,
    )
    host_items, dev_items = R * max_seq, R * (H + 1)
    problem["host_cache"] = rng.integers(0, 256, host_items * item_size_bytes, dtype=np.uint8)
    problem["device_buffer"] = rng.integers(0, 256, dev_items * item_size_bytes, dtype=np.uint8)
    problem["top_k_device_locs"] = np.full((batch, K), 12345, np.int32)
    if record_plan:
        problem["miss_src"] = np.full((batch, K), -7, np.int64)
        problem["miss_dst"] = np.full((batch, K), -7, np.int32)
        problem["miss_count"] = np.full(batch, -7, np.int32)
    else:
        problem["miss_src"] = problem["miss_dst"] = problem["miss_count"] = None
    problem["top_k_tokens"] = np.zeros((batch, K), np.int32)
    new_queries(rng, problem, hit_fraction=hit_fraction, newest_probability=newest_probability)
    return problem


def new_queries(rng, problem, *, hit_fraction=0.5, newest_probability=0.5, grow=False):
    """Fresh valid ``top_k_tokens`` for every row, given the current tags (in place).

    With ``grow``, long rows first advance by one token (``seq_len += 1``; the previous
    newest token gets its host backup), as a decode step does.
    """
    K, H = problem["num_top_k"], problem["hot_buffer_size"]
    tokens = problem["top_k_tokens"]
    host_locs = problem["host_cache_locs"]
    max_seq = host_locs.shape[1]
    for b in range(tokens.shape[0]):
        r = int(problem["req_pool_indices"][b])
        seq_len = int(problem["seq_lens"][b])
        if seq_len <= H:
            count = min(seq_len, K)
            tokens[b] = rng.integers(-5, 10 * H, K)          # lanes >= count are never read
            tokens[b, :count] = rng.permutation(max(seq_len, 0))[:count]
            tokens[b, :count][rng.random(count) < 0.2] = -1
            continue
        if grow and seq_len < max_seq:
            host_locs[r, seq_len - 1] = r * max_seq + seq_len - 1
            seq_len += 1
            problem["seq_lens"][b] = seq_len
            host_locs[r, seq_len - 1] = -1
        newest = seq_len - 1
        resident = problem["device_buffer_tokens"][r, :H]
        resident = resident[(resident >= 0) & (resident != newest)]
        chosen = []
        if rng.random() < newest_probability:
            chosen.append(newest)
        candidates = np.setdiff1d(np.flatnonzero(host_locs[r, :newest] >= 0), resident)
        need = K - len(chosen)
        n_hit = int(rng.binomial(need, hit_fraction))
        n_hit = min(resident.size, max(n_hit, need - candidates.size))
        if n_hit:
            chosen.extend(rng.choice(resident, size=n_hit, replace=False).tolist())
        if need - n_hit:
            chosen.extend(rng.choice(candidates, size=need - n_hit, replace=False).tolist())
        tokens[b] = rng.permutation(np.array(chosen, np.int32))
    return problem


def copy_problem(problem):
    """A deep copy (NumPy arrays copied, scalars shared)."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in problem.items()}


def to_device_problem(problem):
    """The problem's arrays on the device: the host pool as a zero-copy ``host_cache_array``."""
    out = {}
    for k, v in problem.items():
        if k == "host_cache":
            h = device.host_cache_array(v.shape, v.dtype)
            h[...] = v
            out[k] = h
        elif isinstance(v, np.ndarray):
            out[k] = device.to_device(v)
        else:
            out[k] = v
    return out


def to_host_problem(problem):
    """NumPy copies of every array of a (device) problem."""
    return {k: (device.to_host(v) if k in ARRAY_KEYS and v is not None else v)
            for k, v in problem.items()}


def planned_copy_args(problem, device_buffer, *, num_blocks=2, block_size=64, skip_io=False):
    """Keyword arguments of ``copy_cache_planned_mla`` replaying ``problem``'s recorded plan
    into ``device_buffer`` (another layer's pool)."""
    return dict(miss_src=problem["miss_src"], miss_dst=problem["miss_dst"],
                miss_count=problem["miss_count"], num_real_reqs=problem["num_real_reqs"],
                host_cache=problem["host_cache"], device_buffer=device_buffer,
                item_size_bytes=problem["item_size_bytes"], num_blocks=num_blocks,
                block_size=block_size, skip_io=skip_io)


def compile_examples() -> None:
    """Call every single-step launcher once on small valid inputs (every kernel variant, every rung
    of the kernel ladder), and every rung once at sglang's sizes (K=2048, H=4096, block 1024), where
    the compile-only check proves that its static shared memory fits 48 KiB."""
    from .planned_copy import copy_cache_planned_mla
    from . import load_cache_to_device_buffer_mla, load_cache_to_device_buffer_mla_reference, versions

    rng = np.random.default_rng(0)
    sglang = make_swap_in_problem(rng, batch=1, num_top_k=2048, hot_buffer_size=4096, block_size=1024,
                                  num_real=1, item_size_bytes=16)
    for version in versions.VERSIONS:
        load_cache_to_device_buffer_mla(**to_device_problem(sglang), version=version)
    for index_dtype in (np.int32, np.int64):
        for record_plan in (True, False):
            for skip_io in (False, True):
                p = make_swap_in_problem(rng, batch=3, num_top_k=8, hot_buffer_size=16,
                                         record_plan=record_plan, index_dtype=index_dtype,
                                         num_real=2)
                p["skip_io"] = skip_io
                d = to_device_problem(p)
                for version in versions.VERSIONS:
                    load_cache_to_device_buffer_mla(**d, version=version)
                if record_plan and not skip_io:
                    # Replay the reference's plan (in compile-only mode the kernel never ran).
                    load_cache_to_device_buffer_mla_reference(**p)
                    d = to_device_problem(p)
                    layer = device.to_device(p["device_buffer"])
                    for replay_skip in (False, True):
                        copy_cache_planned_mla(**planned_copy_args(d, layer, skip_io=replay_skip))
