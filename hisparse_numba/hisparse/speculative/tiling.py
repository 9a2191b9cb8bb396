"""Launching a tiled kernel version (``v2_tiles``, ``v3_tuned``): launch geometry, the private
workspace, the kernel's arguments, and the rows of padding.

A request's ``T = steps * top_k`` occurrences are cut into tiles of ``tile * reps`` (``geometry``);
``committer_tile`` and ``copier_tiles`` say when ``v3_tuned`` adds its committer and copier tiles.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ... import device, value_flags
from ...arguments import derived_argument, int64_view
from ...device import cuda
from ..miss_plan import placeholder_plan
from .device_fns import EMPTY_KEY, LANES, MAX_THREADS, NO_OCCURRENCE
from .state import COUNT_GEN, COUNT_UNION, COUNT_WORK


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


def launch_tiled(call, swap_kernel, committer_allowed: bool) -> None:
    """Launch ``swap_kernel`` (a tiled version's factory) on a checked ``SpecCall``: with a
    committer and copier tiles where they fit, when the version has them."""
    t = call.steps * call.top_k
    tile, reps, tiles, committer = geometry(call.batch, t)
    committer = committer and committer_allowed
    copiers = copier_tiles(call.batch, tiles, committer)
    swap = swap_kernel(reps, committer, call.record) if committer_allowed else \
        swap_kernel(reps, call.record)
    work = workspace(call.batch, t)
    try:
        device.launch(swap, (call.batch, tiles + copiers + committer), tile, *kernel_args(call, work))
    except Exception:
        # Only the simulator raises inside a kernel (an out-of-bounds index). What the aborted
        # launch left in the workspace and in the running counters (zero between calls) must not
        # leak into the next call, and its scratch-table entries must belong to a past epoch:
        # the generation advances as a finished call's would.
        clear_workspace(work)
        forget_aborted_call(call)
        raise


def forget_aborted_call(call) -> None:
    """Reset the running counters of the requests of an aborted launch and advance their
    generation, as a finished call would."""
    rids = device.to_host(call.req_pool_indices).astype(np.int64)
    rids = rids[(rids >= 0) & (rids < call.num_requests)]
    n, scratch_state = call.num_requests, call.state.scratch_state
    scratch_state[0, COUNT_WORK * n + rids] = 0
    scratch_state[0, COUNT_UNION * n + rids] = 0
    gen = scratch_state[0, COUNT_GEN * n + rids].astype(np.int64)
    sigma = (gen & 0x7FFFFFFF) % 0x7FFFFFFF + 1
    scratch_state[0, COUNT_GEN * n + rids] = np.where(gen < 0, sigma - 2 ** 31, sigma)


@cuda.jit(device=True, inline=True)
def padded_row_dev(out, miss_count, b, reps, record, tid, tile):
    """A padding row (``b >= num_real_reqs[0]``): this tile's occurrences output 0, and the
    request's miss count is 0; nothing else changes."""
    t = out.shape[1] * out.shape[2]
    top_k = out.shape[2]
    for r in range(reps):
        occ = (cuda.blockIdx.y * tile + tid) * reps + r
        if occ < t:
            out[b, occ // top_k, occ % top_k] = 0
    if record and cuda.blockIdx.y == 0 and tid == 0:
        miss_count[b] = 0


def kernel_args(call, work: "Workspace") -> tuple:
    """The swap kernel's arguments for a checked call and its workspace, in the kernel's order
    (``launch_tiled``)."""
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
