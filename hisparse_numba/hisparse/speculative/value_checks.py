"""The value checks of the speculative swap-in: every value the kernel indexes with, in one pass.

``check_speculative`` (``checks.py``) checks shapes and dtypes on the host; the values live on the
device, so this module checks them there, before the swap kernel runs: one launch of
``value_check_kernel`` (one block per batch row, coalesced reads, atomics into the stream's small
flags buffer, and claims of request slots and device items in a ``value_flags.claim_table``, which
the check's epoch keeps from needing a clear), whose last block writes the verdict.
``value_checks_reference`` computes the same verdict in NumPy; the reference launcher uses it.
docs/speculative-swap-in.md ("What a call must satisfy") lists the rules; lessons 01, 03, 04 and
08 call launchers that run them.

For each real row ``b < num_real_reqs[0]`` with request ``rid = req_pool_indices[b]``:

* ``num_real_reqs[0]`` in ``[0, batch]``; ``rid`` in ``[0, n)``; no request in two real rows.
* ``seq_lens[b * steps + s]`` in ``[0, max_positions]`` (``host_cache_locs``' width).
* for every selected valid token (``0 <= token < seq_len``): ``host_cache_locs[rid, token]`` is
  negative (never backed up) or an item of ``host_cache``.
* ``device_buffer_locs[rid, :]`` negative (no location) or an item of ``device_buffer``;
  ``state.scratch_locs[rid, :]`` an item of ``device_buffer``; all these locations distinct over
  the batch (a copy into a shared location would race with a read or another copy).
* the state is one a call left: work and union-hit counters 0, no metadata-table entry tagged with
  the coming call's scratch epoch (a row that looks full would make the ordered insert probe
  forever), reference epochs in ``[0, 2^EPOCH_BITS)``.

The verdict is ``[(count, first), ...]`` per condition (``value_flags.check_flags``); ``first`` is
chosen so that it does not depend on thread timing: the smallest position, or for repeats the
smallest repeated value.
"""

from __future__ import annotations

import numpy as np

from ... import device, value_flags
from ...checks import element_at, fail
from ...device import cuda, jit_kernel
from ...value_flags import claim_epoch_dev, finish_check_dev, flag_bad_dev
from .state import COUNT_GEN, COUNT_UNION, COUNT_WORK, epoch_bits, next_sigma, next_sigma_dev
from ...arguments import derived_argument, int64_view

# conditions (value_flags.check_flags)
NUM_REAL, REQUEST, REPEATED_REQUEST, SEQ_LEN, HOST_LOC, DEVICE_LOC, REPEATED_LOC, STATE = range(8)
# what a STATE flag is about: first = 4 * b + kind
COUNTERS, FULL_TABLE, EPOCHS = 0, 1, 2
CHECK_THREADS = 1024         # a GPU block: T = 8192 occurrences take 8 loads per thread


class Sizes:
    """The sizes a verdict depends on (also what its messages quote)."""

    def __init__(self, call):
        self.batch, self.steps, self.top_k = call.batch, call.steps, call.top_k
        self.t = call.steps * call.top_k
        self.n, self.hot, self.cap = call.num_requests, call.hot, call.capacity
        self.width = int(call.device_buffer_locs.shape[1])
        self.max_positions = int(call.host_cache_locs.shape[1])
        self.host_items = int(call.host_cache.nbytes) // call.item_size_bytes
        self.device_items = int(call.device_buffer.nbytes) // call.item_size_bytes
        self.ebits = epoch_bits(call.hot)


# ---------------------------------------------------------------------------------------------
# The reference verdict (NumPy).

def value_checks_reference(call) -> list:
    """The verdict of ``value_check_kernel`` on host arrays, computed with whole-batch passes."""
    z = Sizes(call)
    verdict = [(0, -1)] * value_flags.CHECK_CONDITIONS

    def record(condition, where):
        where = np.asarray(where, dtype=np.int64).reshape(-1)
        if where.size:
            verdict[condition] = (int(where.size), int(where.min()))

    num_real = int(np.asarray(call.num_real_reqs)[0])
    if num_real < 0 or num_real > z.batch:
        record(NUM_REAL, [0])
    real = min(max(num_real, 0), z.batch)
    rids = np.asarray(call.req_pool_indices)[:real].astype(np.int64)
    inside = (rids >= 0) & (rids < z.n)
    record(REQUEST, np.flatnonzero(~inside))
    rows = np.flatnonzero(inside)
    rids = rids[rows]
    slots, counts = np.unique(rids, return_counts=True)
    record(REPEATED_REQUEST, np.repeat(slots, counts - 1))

    lens = np.asarray(call.seq_lens).reshape(z.batch, z.steps)[rows].astype(np.int64)
    bad_len = (lens < 0) | (lens > z.max_positions)
    record(SEQ_LEN, (rows[:, None] * z.steps + np.arange(z.steps))[bad_len])
    tokens = np.asarray(call.top_k_tokens)[rows].astype(np.int64)           # [r, steps, top_k]
    valid = ~bad_len[:, :, None] & (tokens >= 0) & (tokens < lens[:, :, None])
    hcl = np.asarray(call.host_cache_locs)
    src = np.where(valid, hcl[rids[:, None, None], np.where(valid, tokens, 0)], -1)
    occ = rows[:, None, None] * z.t + np.arange(z.t).reshape(z.steps, z.top_k)
    record(HOST_LOC, occ[src >= z.host_items])

    dbl = np.asarray(call.device_buffer_locs)[rids].astype(np.int64)       # [r, width]
    scratch = np.asarray(call.state.scratch_locs)[rids].astype(np.int64)   # [r, cap]
    bad_dbl = dbl >= z.device_items
    bad_scratch = (scratch < 0) | (scratch >= z.device_items)
    record(DEVICE_LOC, np.concatenate([
        2 * (rows[:, None] * z.width + np.arange(z.width))[bad_dbl],
        2 * (rows[:, None] * z.cap + np.arange(z.cap))[bad_scratch] + 1]))
    held = np.concatenate([dbl[(dbl >= 0) & ~bad_dbl], scratch[~bad_scratch]])
    locs, counts = np.unique(held, return_counts=True)
    record(REPEATED_LOC, np.repeat(locs, counts - 1))

    state = call.state
    ss = np.asarray(state.scratch_state)
    counters = np.stack([ss[0, COUNT_WORK * z.n + rids], ss[0, COUNT_UNION * z.n + rids]], axis=1)
    sigma = np.array([next_sigma(int(g)) for g in ss[0, COUNT_GEN * z.n + rids]], dtype=np.int64)
    table = np.ascontiguousarray(ss[rids + 1, :2 * z.t]).view(np.int64)    # [r, t]
    ref = np.asarray(state.cache_policy)[rids + 1, :z.hot].astype(np.int64)
    record(STATE, np.concatenate([
        np.repeat(4 * rows + COUNTERS, (counters != 0).sum(axis=1)),
        np.repeat(4 * rows + FULL_TABLE, ((table >> 32) == sigma[:, None]).sum(axis=1)),
        np.repeat(4 * rows + EPOCHS, ((ref < 0) | (ref >= 1 << z.ebits)).sum(axis=1))]))
    return verdict


# ---------------------------------------------------------------------------------------------
# The kernel: the same verdict, one block per batch row.

REQUEST_CLAIMS, LOCATION_CLAIMS = 0, 1    # the planes of the claim table


@cuda.jit(device=True, inline=True)
def hold_location_dev(claims, loc, epoch, flags):
    """Count device location ``loc`` as held by this call; a second holder is a repeat."""
    if cuda.atomic.exch(claims, (LOCATION_CLAIMS, loc), epoch) == epoch:
        flag_bad_dev(flags, REPEATED_LOC, loc)


@cuda.jit(device=True, inline=True)
def value_check_dev(top_k_tokens, host_cache_locs, device_buffer_locs, req_pool_indices, seq_lens,
                    num_real_reqs, cache_policy, scratch_locs, scratch_state, metadata, host_items,
                    device_items, epoch_limit, claims, flags):
    epoch = claim_epoch_dev(flags)
    b = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    batch, steps, top_k = top_k_tokens.shape
    t = steps * top_k
    n, cap = scratch_locs.shape
    width = device_buffer_locs.shape[1]
    hot = cache_policy.shape[1]
    num_real = num_real_reqs[0]
    if b == 0 and tid == 0 and (num_real < 0 or num_real > batch):
        flag_bad_dev(flags, NUM_REAL, 0)
    if b >= num_real:
        return
    rid = req_pool_indices[b]
    if rid < 0 or rid >= n:
        if tid == 0:
            flag_bad_dev(flags, REQUEST, b)
        return
    if tid == 0 and cuda.atomic.exch(claims, (REQUEST_CLAIMS, rid), epoch) == epoch:
        flag_bad_dev(flags, REPEATED_REQUEST, rid)
    max_positions = host_cache_locs.shape[1]
    i = tid
    while i < steps:
        seq_len = seq_lens[b * steps + i]
        if seq_len < 0 or seq_len > max_positions:
            flag_bad_dev(flags, SEQ_LEN, b * steps + i)
        i += nthreads
    occ = tid
    while occ < t:
        s = occ // top_k
        seq_len = seq_lens[b * steps + s]
        token = top_k_tokens[b, s, occ - s * top_k]
        if seq_len <= max_positions and 0 <= token and token < seq_len:
            if host_cache_locs[rid, token] >= host_items:
                flag_bad_dev(flags, HOST_LOC, b * t + occ)
        occ += nthreads
    c = tid
    while c < width:
        loc = device_buffer_locs[rid, c]
        if loc >= device_items:
            flag_bad_dev(flags, DEVICE_LOC, 2 * (b * width + c))
        elif loc >= 0:
            hold_location_dev(claims, loc, epoch, flags)
        c += nthreads
    u = tid
    while u < cap:
        loc = scratch_locs[rid, u]
        if loc < 0 or loc >= device_items:
            flag_bad_dev(flags, DEVICE_LOC, 2 * (b * cap + u) + 1)
        else:
            hold_location_dev(claims, loc, epoch, flags)
        u += nthreads
    if tid < 2 and scratch_state[0, (COUNT_WORK + tid) * n + rid] != 0:
        flag_bad_dev(flags, STATE, 4 * b + COUNTERS)
    sigma = next_sigma_dev(np.int64(scratch_state[0, COUNT_GEN * n + rid]))
    p = tid
    while p < t:
        if (metadata[rid + 1, p] >> 32) == sigma:
            flag_bad_dev(flags, STATE, 4 * b + FULL_TABLE)
        p += nthreads
    s = tid
    while s < hot:
        r = cache_policy[rid + 1, s]
        if r < 0 or r >= epoch_limit:
            flag_bad_dev(flags, STATE, 4 * b + EPOCHS)
        s += nthreads


@jit_kernel(max_threads=CHECK_THREADS)
def value_check_kernel(top_k_tokens, host_cache_locs, device_buffer_locs, req_pool_indices,
                       seq_lens, num_real_reqs, cache_policy, scratch_locs, scratch_state, metadata,
                       host_items, device_items, epoch_limit, claims, flags, verdict):
    value_check_dev(top_k_tokens, host_cache_locs, device_buffer_locs, req_pool_indices, seq_lens,
                    num_real_reqs, cache_policy, scratch_locs, scratch_state, metadata, host_items,
                    device_items, epoch_limit, claims, flags)
    finish_check_dev(flags, verdict)


def start_value_checks(call) -> value_flags.ValueCheck:
    """Enqueue :func:`value_check_kernel` on ``call`` (``value_flags.start_check``). Its claim
    table has a plane of request slots and one of device items: it grows with the arguments'
    sizes, never with values, and is never cleared."""
    z = Sizes(call)
    claims = value_flags.claim_table(max(z.n, z.device_items), planes=2)
    state = call.state
    threads = CHECK_THREADS if device.backend() == "cuda" else 32
    return value_flags.start_check(
        value_check_kernel, max(1, z.batch), threads, call.top_k_tokens, call.host_cache_locs,
        call.device_buffer_locs, call.req_pool_indices, call.seq_lens, call.num_real_reqs,
        state.cache_policy, state.scratch_locs, state.scratch_state,
        derived_argument("int64", state.scratch_state, int64_view), z.host_items,
        z.device_items, 1 << z.ebits, claims)


# ---------------------------------------------------------------------------------------------
# The verdict as a ValueError.

def value_checks(call, *, on_device: bool) -> None:
    """Check every value the kernel indexes with; raise the first failed condition's ValueError."""
    if call.batch == 0:
        return
    raise_value_flags(start_value_checks(call).verdict() if on_device else value_checks_reference(call),
                      call)


def raise_value_flags(verdict, call) -> None:
    """The ValueError of the first failed condition of ``verdict`` (none failed: returns)."""
    for condition, (count, first) in enumerate(verdict):
        if count:
            fail(value_check_message(call, condition, count, first))


def value_check_message(call, condition: int, count: int, first: int) -> str:
    z = Sizes(call)
    if condition == NUM_REAL:
        return f"num_real_reqs[0] = {element_at(call.num_real_reqs, 0)} must be in [0, batch = {z.batch}]"
    if condition == REQUEST:
        return (f"req_pool_indices[{first}] = {element_at(call.req_pool_indices, first)} is outside "
                f"[0, {z.n}) (the state's request slots)")
    if condition == REPEATED_REQUEST:
        return (f"req_pool_indices names request slot {first} in more than one real batch row; "
                "the indices of real rows must be distinct (a row owns its request's state)")
    if condition == SEQ_LEN:
        return (f"seq_lens[{first}] = {element_at(call.seq_lens, first)} is outside [0, {z.max_positions}] "
                f"(host_cache_locs holds {z.max_positions} positions per request)")
    if condition == HOST_LOC:
        b, occ = divmod(first, z.t)
        s, k = divmod(occ, z.top_k)
        rid = element_at(call.req_pool_indices, b)
        token = element_at(call.top_k_tokens, b, s, k)
        return (f"host_cache_locs[{rid}, {token}] = {element_at(call.host_cache_locs, rid, token)} "
                f"(selected by top_k_tokens[{b}, {s}, {k}]) is past the host pool: host_cache "
                f"holds {z.host_items} items of item_size_bytes = {call.item_size_bytes}; "
                f"{count} selected positions are")
    if condition == DEVICE_LOC:
        where, is_scratch = divmod(first, 2)
        if is_scratch:
            b, u = divmod(where, z.cap)
            rid = element_at(call.req_pool_indices, b)
            return (f"state.scratch_locs[{rid}, {u}] = {element_at(call.state.scratch_locs, rid, u)} must "
                    f"be a device location in [0, {z.device_items}) (items of device_buffer): "
                    "assign every request in the batch its landing zone before a call")
        b, c = divmod(where, z.width)
        rid = element_at(call.req_pool_indices, b)
        return (f"device_buffer_locs[{rid}, {c}] = {element_at(call.device_buffer_locs, rid, c)} is past "
                f"the device pool: device_buffer holds {z.device_items} items of item_size_bytes "
                f"= {call.item_size_bytes} (-1 = no location)")
    if condition == REPEATED_LOC:
        return (f"device location {first} is held more than once among device_buffer_locs and "
                "state.scratch_locs of the requests in this call; hot slots, tail columns and "
                "scratch entries must own distinct locations (copies into one would race)")
    b, kind = divmod(first, 4)
    rid = element_at(call.req_pool_indices, b)
    if kind == COUNTERS:
        return (f"state.scratch_state row 0: the work / union-hit counters of request {rid} are "
                "not 0, which every call leaves them at; the state is corrupted "
                "(initialize_hisparse_spec_state resets a request)")
    if kind == FULL_TABLE:
        gen = element_at(call.state.scratch_state, 0, COUNT_GEN * z.n + rid)
        return (f"state.scratch_state row {rid + 1} holds {count} scratch-table entries tagged "
                f"with the coming call's scratch epoch {next_sigma(gen)}; the state is corrupted "
                "(initialize_hisparse_spec_state resets a request)")
    return (f"state.cache_policy row {rid + 1} holds reference epochs outside "
            f"[0, 2^{z.ebits}); the state is corrupted (initialize_hisparse_spec_state resets a "
            "request)")

