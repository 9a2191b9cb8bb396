"""The persistent state of the speculative (multi-step) HiSparse swap-in, and its initialiser.

docs/speculative-swap-in.md ("State", "Hash banks") states what it reproduces; lessons 01, 03,
04 and 08 build it with ``make_hisparse_spec_state``. Initialiser: ``check_initialize(...) ->
InitializeCall`` (the device value pass enqueued), then ``launch_unchecked(call)`` behind its gate
and ``settle_initialize(call)`` for the verdict.

``HiSparseSpecState`` keeps sglang's four tensors and their layout, so that every index here maps
1:1 to sglang's (docs/speculative-swap-in.md, "State"). With ``n`` request slots, hot size ``H``, ``T = steps * top_k``
occurrences per request and a power-of-two ``hash_size``:

``cache_index`` ``[n, 2, hash_size]`` int64
    Two hash banks per request mapping token -> hot slot. An entry packs ``(slot << 32) | token``;
    ``-1`` is empty and ``-2`` a deleted tombstone (any negative entry is free). Bank 0 is indexed
    by ``h0(token)`` (Knuth multiplicative), bank 1 by ``h1(token)`` (sglang's murmur-style finaliser).
    The hash is a *hint*: a lookup trusts an entry only if ``device_buffer_tokens[slot] == token``.
``cache_policy`` ``[n + 1, H]`` int32 (its width *defines* H)
    Row 0, column ``rid``: the packed CLOCK state of request ``rid``, ``(epoch << CURSOR_BITS) |
    cursor`` read as a uint32 (``CURSOR_BITS = ceil(log2 H)``, at most 23 epoch bits). Row
    ``rid + 1``: the reference epoch of each of the H hot slots.
``scratch_locs`` ``[n, capacity]`` int32
    Physical device locations owned by the request that serve as the landing zone for misses
    (-1 = none). Promotion swaps them with hot-slot locations.
``scratch_state`` ``[n + 1, W]`` int32, ``W >= max(4n, 5T)``, even row stride
    Row 0 holds four counter banks of ``n`` entries: last unique-miss count, work count (unique
    misses of the running call), union-hit count (distinct hot slots referenced by the running
    call) and the scratch generation (bits 0-30; bit 31 = HASH_DEGRADED, sticky until the request
    is initialised again). Row ``rid + 1`` is the per-call miss metadata, seen as int64 words:
    ``T`` scratch-table entries ``(sigma << 32) | token``, then ``T`` index entries
    ``(sigma << 32) | unique_idx`` (or ``| device_loc`` for direct-overflow misses), then ``T`` int32
    compact entries (table position in bits 0-12, claim bit 29, admit bit 30). ``sigma`` is the
    call's scratch epoch, so entries of earlier calls are invisible without clearing the row.

Hash banks, lookups and inserts: ``hash.py``.

``initialize_hisparse_spec_state`` launch geometry: one block of ``INIT_THREADS`` per entry of
``req_pool_indices``; the block clears the request's banks, reference epochs, metadata row, CLOCK
state and counters, then inserts every hot slot ``s < H`` holding a token ``>= 0`` (items in slot
order).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ... import device, value_flags
from ...checks import check_dtype, check_inner_contiguous, check_ndim, fail, row_stride
from ...device import cuda
from ..limits import MAX_OCCURRENCES
from .hash import KNUTH, MASK32, hash_insert_dev, hash_insert_reference
from ...checks import (attach_check, check_int, check_mode, check_no_overlap, launch_then_settle,
                      require_array, settle)
from ...value_flags import gate_closed_dev
from .state_checks import initialize_checks_reference, raise_initialize_flags, start_initialize_check

COMPACT_POS_MASK = 0x1FFF
CLAIM_BIT = 1 << 29
ADMIT_BIT = 1 << 30
HASH_DEGRADED = 1 << 31
CLOCK_VICTIM_SAMPLES = 6
COMMIT_CHUNK = 512              # union mode commits the misses 512 at a time, as sglang's commit block
MAX_HOT_BUFFER_SIZE = 32768
COUNT_LAST, COUNT_WORK, COUNT_UNION, COUNT_GEN = 0, 1, 2, 3
INIT_THREADS = 256
UNRESOLVED = MASK32     # index entry of a direct-overflow miss left without a victim


class HiSparseSpecState(NamedTuple):
    """The four per-layer state tensors of the speculative swap-in (module docstring: layout)."""

    cache_index: object
    cache_policy: object
    scratch_locs: object
    scratch_state: object


# ---------------------------------------------------------------------------------------------
# Small pure functions, used by the references and (compiled) by the kernels.

def clock_bits(hot_buffer_size):
    """(cursor bits, epoch bits) of the packed CLOCK state for ``H`` hot slots: ``ceil(log2 H)``
    (at least 1), and the rest of 32 bits up to 23. A loop rather than ``bit_length``, so that the
    kernels compute it from a runtime ``H`` (``clock_bits_dev``)."""
    cbits = 1
    while (1 << cbits) < hot_buffer_size:
        cbits += 1
    return cbits, min(23, 32 - cbits)


def cursor_bits(hot_buffer_size: int) -> int:
    return clock_bits(int(hot_buffer_size))[0]


def epoch_bits(hot_buffer_size: int) -> int:
    return clock_bits(int(hot_buffer_size))[1]


def hash_size_for(hot_buffer_size: int) -> int:
    """The usual bank size: the next power of two >= 2H (8192 for H = 4096)."""
    return 1 << (2 * int(hot_buffer_size) - 1).bit_length()


def metadata_width(num_requests: int, num_steps: int, num_top_k: int) -> int:
    w = max(4 * int(num_requests), 5 * int(num_steps) * int(num_top_k))
    return w + (w & 1)


def default_scratch_capacity(hot_buffer_size: int, num_steps: int, num_top_k: int) -> int:
    """sglang's coordinator choice: ``min(T, max(1024, T - H))``; always >= T - H."""
    t = int(num_steps) * int(num_top_k)
    return min(t, max(1024, t - int(hot_buffer_size)))



def approximate_candidate(linear, epoch, hot):
    """The hot slot at step ``linear`` of an approximate-mode walk in call epoch ``epoch``:
    ``(linear * KNUTH + epoch) mod 2^32 mod hot``."""
    return ((np.int64(linear) * KNUTH + epoch) & MASK32) % hot


def next_epoch(packed, cbits, ebits):
    """This call's cache epoch E: the stored epoch + 1, wrapped to ``ebits`` bits, never 0."""
    e = ((packed & 0xFFFFFFFF) >> cbits) + 1
    if e >= (1 << ebits):
        e = e * 0 + 1       # 1 of e's type (the simulator keeps NumPy scalar types)
    return e


def pack_clock(epoch, cursor, cbits):
    """``(epoch << cbits) | cursor`` as the int32 value that holds those 32 bits."""
    p = (epoch << cbits) | cursor
    if p >= 0x80000000:
        p -= 0x100000000
    return p


def next_sigma(gen):
    """This call's scratch epoch: the generation's low 31 bits + 1, wrapping to 1."""
    s = (gen & 0x7FFFFFFF) + 1
    if s > 0x7FFFFFFF:
        s = s * 0 + 1
    return s


def pack_generation(sigma, degraded):
    return sigma - 0x80000000 if degraded else sigma


clock_bits_dev = cuda.jit(device=True, inline=True)(clock_bits)
approximate_candidate_dev = cuda.jit(device=True, inline=True)(approximate_candidate)
next_epoch_dev = cuda.jit(device=True, inline=True)(next_epoch)
pack_clock_dev = cuda.jit(device=True, inline=True)(pack_clock)
next_sigma_dev = cuda.jit(device=True, inline=True)(next_sigma)
pack_generation_dev = cuda.jit(device=True, inline=True)(pack_generation)


# ---------------------------------------------------------------------------------------------
# Allocation and validation.

def make_hisparse_spec_state(num_requests, hot_buffer_size, num_steps, num_top_k,
                             scratch_capacity=None, *, scratch_locs=None) -> HiSparseSpecState:
    """Allocate a state with the documented shapes (device arrays).

    ``cache_index`` all -1; ``cache_policy`` zeros; ``scratch_state`` row 0 zeros and the metadata
    rows -1. ``scratch_locs``: the ``[num_requests, capacity]`` device locations each request owns
    as its landing zone (copied in); without it every entry is -1, and the swap-in rejects a call
    on a request until its landing zone is assigned (``state.scratch_locs[rid] = ...``).
    ``scratch_capacity`` defaults to ``min(T, max(1024, T - H))`` (or ``scratch_locs``' width).
    Call ``initialize_hisparse_spec_state`` for each request once its hot slots are filled.
    Every size is checked here, so the state fits the launchers (ValueError naming the argument).
    """
    n = check_int("num_requests", num_requests, 1)
    hot = check_int("hot_buffer_size", hot_buffer_size, 2, MAX_HOT_BUFFER_SIZE)
    steps = check_int("num_steps", num_steps, 2, 4)
    top_k = check_int("num_top_k", num_top_k, 1, MAX_OCCURRENCES // steps)
    if n > hot:
        fail(f"make_hisparse_spec_state needs 0 < num_requests <= hot_buffer_size and "
             f"hot_buffer_size >= 2, got num_requests={n}, hot_buffer_size={hot}")
    if scratch_locs is not None:
        require_array("scratch_locs", scratch_locs)
        if scratch_locs.ndim != 2 or scratch_locs.shape[0] != n or scratch_locs.shape[1] < 1:
            fail(f"scratch_locs must have shape [num_requests = {n}, capacity >= 1], got shape "
                 f"{tuple(scratch_locs.shape)}")
        if np.dtype(scratch_locs.dtype).kind not in "iu":
            fail(f"scratch_locs must hold integer device locations, got dtype {scratch_locs.dtype}")
    if scratch_capacity is None:
        cap = default_scratch_capacity(hot, steps, top_k) if scratch_locs is None \
            else int(scratch_locs.shape[1])
    else:
        cap = check_int("scratch_capacity", scratch_capacity, 1, MAX_OCCURRENCES)
        if scratch_locs is not None and cap != scratch_locs.shape[1]:
            fail(f"scratch_capacity ({cap}) must equal scratch_locs' width ({scratch_locs.shape[1]})")
    xp = device.xp
    scratch_state = xp.full((n + 1, metadata_width(n, steps, top_k)), -1, dtype=xp.int32)
    scratch_state[0] = 0
    locs = xp.full((n, cap), -1, dtype=xp.int32)
    if scratch_locs is not None:
        locs[...] = xp.asarray(scratch_locs).astype(xp.int32)
    return HiSparseSpecState(
        cache_index=xp.full((n, 2, hash_size_for(hot)), -1, dtype=xp.int64),
        cache_policy=xp.zeros((n + 1, hot), dtype=xp.int32),
        scratch_locs=locs,
        scratch_state=scratch_state,
    )


def check_state(state, *, num_occurrences=None) -> tuple:
    """Structural checks of a ``HiSparseSpecState`` (docs/speculative-swap-in.md, "State").

    Returns ``(num_request_slots, hot_buffer_size, hash_size, scratch_capacity)``.
    """
    if not isinstance(state, HiSparseSpecState):
        fail(f"state must be a HiSparseSpecState, got {type(state).__name__}")
    ci, cp, sl, ss = state
    for name, a in zip(state._fields, state):
        require_array(f"state.{name}", a)
    check_ndim("state.scratch_locs", sl, 2, "[num_requests, capacity]")
    check_dtype("state.scratch_locs", sl, np.int32)
    n, cap = int(sl.shape[0]), int(sl.shape[1])
    if n <= 0 or cap <= 0:
        fail(f"state.scratch_locs must have shape [num_requests > 0, capacity > 0], got shape {tuple(sl.shape)}")
    check_dtype("state.cache_index", ci, np.int64)
    if ci.ndim != 3 or ci.shape[1] != 2:
        fail(f"state.cache_index must have shape [num_requests, 2, hash_size], got shape {tuple(ci.shape)}")
    hs = int(ci.shape[2])
    if hs <= 0 or hs & (hs - 1):
        fail(f"state.cache_index hash_size must be a power of two, got {hs}")
    if ci.shape[0] < n:
        fail(f"state.cache_index has {ci.shape[0]} request rows, fewer than scratch_locs ({n})")
    check_dtype("state.cache_policy", cp, np.int32)
    if cp.ndim != 2 or cp.shape[0] < n + 1:
        fail(f"state.cache_policy must have shape [num_requests + 1, hot_buffer_size] "
             f"(one CLOCK control row and one reference-epoch row per request), "
             f"got shape {tuple(cp.shape)} for {n} requests")
    hot = int(cp.shape[1])
    if hot < 2 or hot > MAX_HOT_BUFFER_SIZE:
        fail(f"hot_buffer_size (state.cache_policy width) must be in [2, {MAX_HOT_BUFFER_SIZE}], got {hot}")
    if n > hot:
        fail(f"state has {n} request slots but the CLOCK control row holds only "
             f"hot_buffer_size={hot} columns")
    check_dtype("state.scratch_state", ss, np.int32)
    need = max(4 * n, 5 * (num_occurrences or 0))
    if ss.ndim != 2 or ss.shape[0] < n + 1 or ss.shape[1] < need:
        fail(f"state.scratch_state must have shape [num_requests + 1, >= {need}] (one counter row "
             f"and one miss-metadata row per request), got shape {tuple(ss.shape)}")
    if row_stride(ss) % 2:
        fail(f"state.scratch_state row stride must be even (64-bit aligned metadata), got {row_stride(ss)} elements")
    if device.data_address(ss) % 8:
        fail(f"state.scratch_state must start on an 8-byte boundary (its metadata is read as int64 "
             f"words), got a view starting {device.data_address(ss) % 8} bytes past one")
    for name, a in (("cache_index", ci), ("cache_policy", cp), ("scratch_locs", sl),
                    ("scratch_state", ss)):
        check_inner_contiguous(f"state.{name}", a)
    if ci.ndim == 3 and (ci.strides[1] != hs * 8):
        fail("state.cache_index banks must be contiguous ([..., 2, hash_size] dense)")
    return n, hot, hs, cap


class InitializeCall(NamedTuple):
    """One checked ``initialize_hisparse_spec_state`` call: sizes, then every array."""

    num_requests: int
    hot: int
    device_buffer_tokens: object
    req_pool_indices: object
    state: object
    gate: object = None        # the value check's flags (value_flags.start_check); None: always open
    pending: object = None     # that check's ValueCheck until settle_initialize takes its verdict


def check_initialize(*, device_buffer_tokens, req_pool_indices, state, checks="full",
                     on_device: bool = True, defer: bool = False) -> InitializeCall:
    """Every check of the initialiser (ValueError naming the argument, before any write).

    ``checks="full"`` (default) also checks the values of ``req_pool_indices`` (request slots in
    ``[0, n)``, distinct) in one device pass (``state_checks``); ``"shapes"`` skips that for
    callers who validated them. ``on_device=False`` computes the same verdict in NumPy (the
    reference). ``defer=True`` (the launcher): return once the device pass is enqueued, with the
    call's ``gate`` and ``pending`` check; :func:`settle_initialize` raises after the gated launch.
    """
    check_mode(checks)
    n, hot, _, _ = check_state(state)
    require_array("device_buffer_tokens", device_buffer_tokens)
    require_array("req_pool_indices", req_pool_indices)
    check_ndim("device_buffer_tokens", device_buffer_tokens, 2, "[num_requests, H + tail]")
    check_dtype("device_buffer_tokens", device_buffer_tokens, np.int32)
    check_inner_contiguous("device_buffer_tokens", device_buffer_tokens)
    if device_buffer_tokens.shape[1] < hot or device_buffer_tokens.shape[0] < n:
        fail(f"device_buffer_tokens must have shape [>= {n}, >= {hot}], got shape {tuple(device_buffer_tokens.shape)}")
    check_ndim("req_pool_indices", req_pool_indices, 1, "[batch]")
    check_dtype("req_pool_indices", req_pool_indices, np.int64)
    check_no_overlap({f"state.{f}": a for f, a in zip(state._fields, state)},   # (the state is written)
                     {"device_buffer_tokens": device_buffer_tokens, "req_pool_indices": req_pool_indices})
    call = InitializeCall(n, hot, device_buffer_tokens, req_pool_indices, state)
    if checks != "full" or req_pool_indices.shape[0] == 0:
        return call
    if not on_device:
        raise_initialize_flags(initialize_checks_reference(req_pool_indices, n), call)
        return call
    return attach_check(call, start_initialize_check(req_pool_indices, n), settle_initialize, defer)


def settle_initialize(call: InitializeCall) -> InitializeCall:
    """Wait for ``call``'s device value check: raise its ValueError or return the settled call."""
    return settle(call, raise_initialize_flags)


# ---------------------------------------------------------------------------------------------
# initialize_hisparse_spec_state

def _reset_request_reference(dbt, state, rid, hot) -> None:
    ci, cp, _, ss = state
    n = state.scratch_locs.shape[0]
    ci[rid] = -1
    cp[rid + 1, :hot] = 0
    ss[rid + 1, :] = 0
    cp[0, rid] = 0
    for bank in range(4):
        ss[0, bank * n + rid] = 0
    tokens = dbt[rid, :hot]
    entries = [(int(s) << 32) | int(tokens[s]) for s in range(hot) if tokens[s] >= 0]
    if hash_insert_reference(ci[rid, 0], ci[rid, 1], entries):
        ss[0, COUNT_GEN * n + rid] = pack_generation(0, True)


def initialize_hisparse_spec_state_reference(*, device_buffer_tokens, req_pool_indices, state,
                                            checks="full") -> None:
    """NumPy oracle of ``initialize_hisparse_spec_state`` (same keywords; mutates ``state``)."""
    call = check_initialize(device_buffer_tokens=device_buffer_tokens,
                            req_pool_indices=req_pool_indices, state=state, checks=checks,
                            on_device=False)
    for rid in np.asarray(req_pool_indices):
        _reset_request_reference(device_buffer_tokens, state, int(rid), call.hot)


def init_slot_capacity(hot: int) -> int:
    """Entries of the initialiser's two shared slot lists for ``H`` hot slots: ``H`` rounded up to
    a power of two (at least 32), so that one compiled initialiser serves every ``H`` up to it;
    ``H`` itself above 8192, where the rounded lists would pass 48 KiB of static shared memory."""
    capacity = max(32, 1 << (int(hot) - 1).bit_length())
    return capacity if capacity <= 8192 else int(hot)


@functools.cache
def _init_kernel(capacity: int):
    """The initialiser for every ``H <= capacity`` (``init_slot_capacity``); ``H`` is
    ``cache_policy``'s width at run time."""
    @cuda.jit
    def initialize_kernel(dbt, req_pool_indices, cache_index, cache_policy, scratch_state, n, gate):
        if gate_closed_dev(gate):                  # the call's value check rejected it
            return
        tid = cuda.threadIdx.x
        nthreads = cuda.blockDim.x
        rid = req_pool_indices[cuda.blockIdx.x]
        hot = cache_policy.shape[1]
        slots = cuda.shared.array(capacity, np.int16)
        pend = cuda.shared.array(capacity, np.int16)
        flag = cuda.shared.array(1, np.int32)
        scan = cuda.shared.array(INIT_THREADS, np.int32)
        no_cells = cuda.shared.array(1, np.int32)   # no room for a settle table: racing rounds
        hs = cache_index.shape[2]
        i = tid
        while i < 2 * hs:
            cache_index[rid, i // hs, i % hs] = -1
            i += nthreads
        i = tid
        while i < hot:
            cache_policy[rid + 1, i] = 0
            slots[i] = i if dbt[rid, i] >= 0 else -1
            i += nthreads
        i = tid
        while i < scratch_state.shape[1]:
            scratch_state[rid + 1, i] = 0
            i += nthreads
        if tid == 0:
            flag[0] = 0
            cache_policy[0, rid] = 0
            for bank in range(4):
                scratch_state[0, bank * n + rid] = 0
        cuda.syncthreads()
        hash_insert_dev(cache_index, rid, dbt, slots, hot, pend, flag, scan, no_cells, tid, nthreads,
                        False)
        if tid == 0 and flag[0] != 0:
            scratch_state[0, COUNT_GEN * n + rid] = pack_generation_dev(0, True)

    return initialize_kernel


def initialize_hisparse_spec_state(*, device_buffer_tokens, req_pool_indices, state,
                                   checks="full") -> None:
    """Reset the state of every request in ``req_pool_indices`` and index its hot slots.

    device_buffer_tokens: ``[>= n, >= H]`` int32 (slot -> token, -1 = empty).
    req_pool_indices: ``[k]`` int64 request slots in ``[0, n)``, distinct (checked on the device
    unless ``checks="shapes"``). state: ``HiSparseSpecState``.
    """
    call = check_initialize(device_buffer_tokens=device_buffer_tokens, req_pool_indices=req_pool_indices,
                            state=state, checks=checks, defer=True)
    launch_then_settle(call, launch_unchecked, settle_initialize)   # gated kernel, then the verdict


def launch_unchecked(call: InitializeCall) -> None:
    """The initialiser's launch without any further check (``call`` from ``check_initialize``)."""
    k = int(call.req_pool_indices.shape[0])
    if k == 0:
        return
    state = call.state
    threads = INIT_THREADS if device.backend() == "cuda" else 32   # the simulator: fewer threads
    device.launch(_init_kernel(init_slot_capacity(call.hot)), k, threads, call.device_buffer_tokens,
                  call.req_pool_indices, state.cache_index, state.cache_policy,
                  state.scratch_state, call.num_requests,
                  value_flags.open_gate() if call.gate is None else call.gate)
