"""Launcher of the speculative swap-in: launch geometry, the private workspace, the launch.

``load_cache_to_device_buffer_spec_mla(**keywords, version=None)`` is
``launch_unchecked(check_speculative(**keywords), version)``: checks (``checks.py``), then the
launch of rung ``version`` (``versions.py``; default the tuned rung, ``launch_tuned``: one launch
of ``v3_tuned.swap_kernel`` on a grid sized by ``geometry``). Lessons 01, 03, 04 and 08 call it, and ``launch_unchecked`` where they show what
a check prevents.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ... import device, value_flags
from ...checks import launch_then_settle
from ..miss_plan import placeholder_plan
from .state import COUNT_GEN, COUNT_UNION, COUNT_WORK
from ...arguments import derived_argument, int64_view
from .checks import SpecCall, check_speculative, settle_speculative
from .device_fns import EMPTY_KEY, LANES, MAX_THREADS, NO_OCCURRENCE
from .v3_tuned import swap_kernel
from .versions import DEFAULT, check_version, module


def block_threads(num_occurrences: int) -> int:
    """Threads per tile on a GPU: one per occurrence up to ``MAX_THREADS``, a multiple of 32."""
    return min(MAX_THREADS, max(LANES, -(-int(num_occurrences) // LANES) * LANES))


def tile_threads(num_occurrences: int) -> int:
    """Threads per tile. The simulator uses 32 so that small tests run several tiles per request,
    as sglang's sizes do on a GPU."""
    threads = block_threads(num_occurrences)
    return threads if device.backend() == "cuda" else min(threads, LANES)


def tile_reps(batch: int, num_occurrences: int, tile: int) -> int:
    """Occurrences per thread: the fewest that keep the tiles within two per SM. A 1024-thread tile
    takes 64 registers per thread, so one runs per SM at a time and the tiles run in at most two
    waves; on the H200 that measured better (batch 64) than one wave of 512-thread tiles with four
    occurrences per thread. The simulator uses 2 whenever a request has more than two tiles."""
    tiles = -(-int(num_occurrences) // tile)
    if device.backend() != "cuda":
        return 2 if tiles > 2 else 1
    reps = 1
    while reps < tiles and batch * -(-tiles // reps) > 2 * device.sm_count():
        reps += 1
    return reps


def committer_tile(batch: int, tiles: int) -> bool:
    """Whether each request gets one more tile, without occurrences, that commits it.

    Only when every tile, committers included, runs at once (one 1024-thread tile per SM): the
    commit then runs on an SM of its own beside the copies, and no tile copies after committing.
    When the tiles run in two waves (batch 64 at sglang's sizes) a waiting committer would hold an
    SM that a tile could use, so the last tile to arrive commits instead. The simulator (one "SM")
    takes the second path; the random test forces each."""
    return batch * (tiles + 1) <= device.sm_count()


MAX_COPIERS = 128


def copier_tiles(batch: int, tiles: int, committer: bool) -> int:
    """Copier tiles per request: with a committer tile, the SMs the request's tiles leave idle
    (at most ``MAX_COPIERS``) copy its scratch misses and index its scratch table, so that the
    few tiles holding most of the misses do not copy them alone (batch 1 at sglang's sizes: 8
    tiles, 123 copiers). Only with at least one idle SM per tile: at batch 8 the copies are bound
    by PCIe already, and on the H200 seven copiers per request slowed the commit (their host
    reads delay its loads) more than they sped up the copies. Copiers take the tickets between
    the tiles' and the committer's, so they too wait only for tiles that started before them."""
    spare = device.sm_count() // batch - tiles - 1
    if not committer or spare < tiles:
        return 0
    return min(MAX_COPIERS, spare)


def geometry(batch: int, num_occurrences: int) -> tuple[int, int, int, bool]:
    """(threads per tile, occurrences per thread, tiles per request, committer tile) of a
    launch; the grid is ``(batch, tiles + copier_tiles(...) + committer)``."""
    tile = tile_threads(num_occurrences)
    reps = tile_reps(batch, num_occurrences, tile)
    tiles = -(-int(num_occurrences) // (tile * reps))
    return tile, reps, tiles, committer_tile(batch, tiles)


def load_cache_to_device_buffer_spec_mla(
        *, top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_cache,
        device_buffer, top_k_device_locs, req_pool_indices, seq_lens, state, num_real_reqs,
        miss_src=None, miss_dst=None, miss_count=None, item_size_bytes=None,
        checks="full", version=None) -> None:
    """Resolve all ``steps * top_k`` occurrences of each request in one launch.

    top_k_tokens: ``[batch, steps, top_k]`` int32, 2 <= steps <= 4, steps * top_k <= 8192, dense
    rows. device_buffer_tokens / device_buffer_locs: ``[num_requests, H + tail]`` int32 (same
    layout; mutated). host_cache_locs: ``[num_requests, max_positions]`` int64, row-contiguous.
    host_cache: the host pool (``device.host_cache_array``), item ``i`` at byte
    ``i * item_size_bytes``; device_buffer: the device pool (mutated). top_k_device_locs:
    ``[batch, steps, top_k]`` int32 output. req_pool_indices: ``[batch]`` int64, distinct.
    seq_lens: ``[batch * steps]`` int32, ``b * steps + step``. state: ``HiSparseSpecState``
    (mutated). num_real_reqs: ``[>= 1]`` int32 device array. miss_src ``[>= batch, >= steps *
    top_k]`` int64, miss_dst the same in int32 with the same row stride, miss_count ``[>= batch]``
    int32: all three or none. item_size_bytes: defaults to host_cache's row size in bytes; a
    multiple of 16.

    checks: ``"full"`` (default) checks every value the kernel indexes with on the device first
    (``value_checks.py``, docs/speculative-swap-in.md "What a call must satisfy"), so a bad call
    raises a ValueError and writes nothing; ``"shapes"`` checks shapes, dtypes and scalars only,
    for callers who validated the values upstream (a bad value then corrupts memory or state).

    version: the kernel's rung (``versions.VERSIONS``; None: the tuned one); every rung computes
    the same outputs and state.
    """
    keywords = dict(locals())
    version = check_version(keywords.pop("version"))
    call = check_speculative(**keywords, for_kernel=True, defer=True)
    launch_then_settle(call, lambda c: launch_unchecked(c, version), settle_speculative)


def launch_unchecked(call: SpecCall, version=None) -> None:
    """The launch of a checked call *without* any further check, on rung ``version`` (None: the
    tuned one).

    For lessons that show what a check prevents (``check_speculative(**valid)._replace(...)``)
    and for the benchmark (which times repeated calls on checked arguments); everything else
    calls the launcher.
    """
    version = check_version(version)
    if call.batch == 0:
        return
    try:
        if version == DEFAULT:
            launch_tuned(call)      # v3_tuned.py builds the kernels; launch.py launches them
        else:
            module(version).launch(call)
    except Exception:
        forget_aborted_call(call)
        raise


def forget_aborted_call(call: SpecCall) -> None:
    """After a launch that raised (only the simulator raises inside a kernel, on an out-of-bounds
    index): the running counters (zero between calls) are reset, and the generation advances as
    a finished call's would, so that the aborted call's scratch-table entries belong to a past
    epoch."""
    rids = device.to_host(call.req_pool_indices).astype(np.int64)
    rids = rids[(rids >= 0) & (rids < call.num_requests)]
    n, state = call.num_requests, call.state
    state.scratch_state[0, COUNT_WORK * n + rids] = 0
    state.scratch_state[0, COUNT_UNION * n + rids] = 0
    gen = state.scratch_state[0, COUNT_GEN * n + rids].astype(np.int64)
    sigma = (gen & 0x7FFFFFFF) % 0x7FFFFFFF + 1
    state.scratch_state[0, COUNT_GEN * n + rids] = np.where(gen < 0, sigma - 2 ** 31, sigma)


def launch_tuned(call: SpecCall) -> None:
    """Rung 3 (``v3_tuned``): one launch of the swap kernel on a grid sized by ``geometry``."""
    t = call.steps * call.top_k
    tile, reps, tiles, committer = geometry(call.batch, t)
    copiers = copier_tiles(call.batch, tiles, committer)
    swap = swap_kernel(reps, committer, call.record)
    work = workspace(call.batch, t)
    try:
        device.launch(swap, (call.batch, tiles + copiers + committer), tile,
                      *kernel_args(call, work))
    except Exception:
        clear_workspace(work)    # what the aborted launch left there must not leak into the next
        raise


def kernel_args(call: SpecCall, work: "Workspace") -> tuple:
    """The swap kernel's arguments for a checked call and its workspace, in the kernel's order
    (launch_unchecked; the stamped copies in notes/timeline append their stamps array)."""
    miss_src, miss_dst, miss_count = (call.miss_src, call.miss_dst, call.miss_count) if call.record \
        else placeholder_plan()
    state = call.state
    return (call.top_k_tokens, call.device_buffer_tokens, call.host_cache_locs,
            call.device_buffer_locs, derived_argument("words", call.host_cache, device.byte_words),
            derived_argument("words", call.device_buffer, device.byte_words),
            call.top_k_device_locs, call.req_pool_indices, call.seq_lens, state.cache_index,
            state.cache_policy, state.scratch_locs, state.scratch_state,
            derived_argument("int64", state.scratch_state, int64_view), call.num_real_reqs,
            miss_src, miss_dst, miss_count, *work, call.item_size_bytes // 8, call.tail,
            call.num_requests, value_flags.open_gate() if call.gate is None else call.gate)


class Workspace(NamedTuple):
    """Private buffers of the swap kernel; every tile's ticket, flags and claims are reset by the
    request's finisher (the committer tile, or the last tile to arrive), so they are clean between
    launches.

    counters ``[batch, 2]`` int32: tickets taken and tiles arrived. flags ``[batch, 3, tiles]``
    int32: per tile, claimed (number of tokens it inserted into the claim set + 1) / counted
    (number of first misses + 1) / numbered. claim_keys, claim_first, claim_unique, claim_dst
    ``[batch, K]`` int32 (``K`` = power of two >= 2T): the private set of missed tokens (-1 =
    empty), each token's first occurrence, its unique_idx and, with copier tiles, the scratch
    location its item goes to (-1: none). unique_token, unique_claim ``[batch * T]`` int32: token
    and claim position of unique miss ``u`` (row ``b`` starts at ``b * T``, as in the copy
    lists). copy_src / copy_dst ``[batch * T]`` int64: without copier tiles, each tile's scratch
    copies (host location, scratch location) at ``b * T`` + the tile's first unique_idx; with
    them, each tile's inserted tokens (host location, claim position) at ``b * T + y * tile *
    reps``. claim_dst needs no reset: a launch writes it for every token it claims before reading
    it.
    """

    counters: object
    flags: object
    claim_keys: object
    claim_first: object
    claim_unique: object
    claim_dst: object
    unique_token: object
    unique_claim: object
    copy_src: object
    copy_dst: object


@functools.lru_cache(maxsize=8)
def workspace(batch: int, num_occurrences: int) -> Workspace:
    """The workspace for ``batch`` rows of ``num_occurrences`` (kernels on one stream run in
    order, so calls of the same size share it)."""
    xp = device.xp
    tiles = geometry(batch, num_occurrences)[2]
    flat = batch * num_occurrences
    claims = 1 << (2 * num_occurrences - 1).bit_length()
    work = Workspace(xp.empty((batch, 2), dtype=xp.int32), xp.empty((batch, 3, tiles), dtype=xp.int32),
                     xp.empty((batch, claims), dtype=xp.int32), xp.empty((batch, claims), dtype=xp.int32),
                     xp.empty((batch, claims), dtype=xp.int32),
                     xp.empty((batch, claims), dtype=xp.int32), xp.empty(flat, dtype=xp.int32),
                     xp.empty(flat, dtype=xp.int32), xp.empty(flat, dtype=xp.int64),
                     xp.empty(flat, dtype=xp.int64))
    clear_workspace(work)
    return work


def clear_workspace(work: Workspace) -> None:
    """The state every launch expects: no tickets, no flags, an empty claim set."""
    work.counters[...] = 0
    work.flags[...] = 0
    work.claim_keys[...] = EMPTY_KEY
    work.claim_first[...] = NO_OCCURRENCE
