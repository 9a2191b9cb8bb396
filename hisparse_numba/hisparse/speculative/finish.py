"""The commit of one request in the tiled kernel versions (``v2_tiles``, ``v3_tuned``): the stages
one whole tile runs once the request's tiles have reached them.

``finish_request_dev`` is run by the committer tile (``v3_tuned`` at small batches), which waits
for the tiles stage by stage, or by the last tile to arrive, for which every stage is done:

* once every tile has counted: the mode, and in union mode the **victims** and their
  **evictions** from the hash (they need only the number of misses and the hits' stamps);
* once every tile has numbered: the index of the scratch table (by the last tile when there are
  copier tiles);
* once every tile has arrived: the workspace reset, in approximate mode **admission**, victims
  and evictions, then each miss's token into its victim's slot with promotion, the **hash**
  inserts, direct overflow and the counters (**finish**).

Each stage follows the stage of ``reference.request_reference`` with the same name; the
single-miss steps they loop over are in ``commit.py`` and ``device_fns.py``. Array groups
(``sel``, ``state``, ``work``, ``plan``) as in ``tiles.py``; ``pools`` is (host_words, dev_words,
words_per_item).
"""

from __future__ import annotations

import numpy as np

from ...blockscan import block_exclusive_scan_dev
from ...device import cuda
from ...itemcopy import copy_item_dev
from .commit import (admit_dev, approximate_victims_dev, count_victims_dev, evict_victims_dev,
                     index_misses_dev, union_victims_dev, warm_l1_dev)
from .device_fns import (COUNTED, LANES, NUMBERED, direct_locations_dev, load_coherent_dev,
                         needs_victim_dev, promote_victim_dev, take_slot_dev, wait_for_tiles_dev)
from .hash import MASK32, clear_cells_dev, hash_insert_dev
from .state import (COMPACT_POS_MASK, COUNT_GEN, COUNT_LAST, COUNT_UNION, COUNT_WORK, UNRESOLVED,
                    clock_bits_dev, next_epoch_dev, next_sigma_dev, pack_clock_dev,
                    pack_generation_dev)


@cuda.jit(device=True, inline=True)
def wait_for_arrivals_dev(counters, b, arrivals, committer, tid):
    """With a committer tile: spin until ``arrivals`` tiles (and copier tiles) have arrived."""
    if committer and tid == 0:
        while load_coherent_dev(counters, (b, 1)) < arrivals:
            pass
        cuda.threadfence()
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def reset_workspace_dev(work, b, tiles, tid, tile):
    """Every tile has arrived: its flags and the request's ticket and arrival counters go back
    to zero for the next launch."""
    counters, flags = work[0], work[1]
    j = tid
    while j < 3 * tiles:
        flags[b, j // tiles, j % tiles] = 0
        j += tile
    if tid == 0:
        counters[b, 0] = 0
        counters[b, 1] = 0


@cuda.jit(device=True, inline=True)
def victims_stage_dev(sel, state, b, rid, union_mode, num_misses, union_hits, sigma, e_now, emask,
                      cursor, tail, degraded, known_loc, victims, aux, scan, flag, tid, tile):
    """victims and evictions (with admission first in approximate mode): each miss that needs a
    hot slot picks its victim, whose token leaves the hash. Returns (first and last + 1 of this
    thread's misses, its first victim ordinal, the number of victims)."""
    top_k_tokens, seq_lens, device_buffer_tokens, device_buffer_locs, host_cache_locs = sel
    cache_index, cache_policy, scratch_locs, scratch_state, metadata = state
    t = top_k_tokens.shape[1] * top_k_tokens.shape[2]
    hot, cap, row, compact = cache_policy.shape[1], scratch_locs.shape[1], rid + 1, 4 * t
    if not union_mode:
        admit_dev(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs,
                  seq_lens, cache_index, cache_policy, scratch_state, metadata, b, rid, row, t,
                  sigma, e_now, num_misses, union_hits, cap, tail, degraded, scan, tid, tile)
    u0, u1, base, num_victims = count_victims_dev(scratch_state, scratch_locs, rid, row,
                                                  num_misses, cap, union_mode, compact,
                                                  known_loc, scan, tid, tile)
    if union_mode:
        union_victims_dev(cache_policy, scratch_state, scratch_locs, rid, row, num_misses, cap,
                          compact, cursor, hot, e_now, emask, victims, aux, flag, u0, u1, base,
                          known_loc, tid)
    else:
        approximate_victims_dev(cache_policy, scratch_state, scratch_locs, rid, row, num_misses,
                                cap, compact, cursor, hot, e_now, victims, aux, flag, u0, u1,
                                base, t, known_loc, tid)
    evict_victims_dev(cache_index, device_buffer_tokens, device_buffer_locs, scratch_state,
                      scratch_locs, victims, rid, row, cap, union_mode, compact, u0, u1, base,
                      known_loc, tid)
    return u0, u1, base, num_victims


@cuda.jit(device=True, inline=True)
def slots_stage_dev(sel, state, work, b, rid, sigma, union_mode, u0, u1, base, known_loc, victims,
                    aux, scan, tid):
    """Each miss takes its victim's slot: its token enters the slot (and its hash insert is
    staged: ``aux``, and ``scan`` for the token), then promotion (zero copy) or direct overflow
    in place; one pass, so that the loads of both are in flight together."""
    device_buffer_tokens, device_buffer_locs = sel[2], sel[3]
    scratch_locs, scratch_state, metadata = state[2], state[3], state[4]
    unique_token = work[6]
    t = sel[0].shape[1] * sel[0].shape[2]
    cap, row = scratch_locs.shape[1], rid + 1
    cuda.syncthreads()
    i = base
    for u in range(u0, u1):
        if needs_victim_dev(scratch_state, scratch_locs, rid, row, u, cap, union_mode, 4 * t,
                            known_loc, tid):
            take_slot_dev(device_buffer_tokens, unique_token, victims, aux, scan, i, u, b, t, rid)
            promote_victim_dev(device_buffer_locs, scratch_locs, scratch_state, metadata, victims,
                               i, u, rid, row, t, 4 * t, cap, sigma)
            i += 1
    cuda.syncthreads()


@cuda.jit(device=True, inline=True)
def overflow_stage_dev(sel, pools, out, state, plan, b, rid, num_misses, record, tid, tile):
    """Direct overflow (misses past the scratch capacity): one warp per miss copies its item from
    the host into the victim's location, recorded in the plan; then every occurrence of such a
    miss outputs that location."""
    host_words, dev_words, words_per_item = pools
    scratch_locs, scratch_state, metadata = state[2], state[3], state[4]
    t = out.shape[1] * out.shape[2]
    cap, row, index, compact = scratch_locs.shape[1], rid + 1, t, 4 * t
    warps, warp, lane = tile // LANES, tid // LANES, tid % LANES
    u = cap + warp
    while u < num_misses:
        p = scratch_state[row, compact + u] & COMPACT_POS_MASK
        dst = metadata[row, index + p] & MASK32
        if dst != UNRESOLVED:
            src = sel[4][rid, load_coherent_dev(metadata, (row, p)) & MASK32]
            copy_item_dev(host_words, src, dev_words, dst, words_per_item, lane, LANES)
            if record and lane == 0:
                plan[0][b, u] = src
                plan[1][b, u] = dst
        elif record and lane == 0:
            plan[0][b, u] = -1
            plan[1][b, u] = -1
        u += warps
    direct_locations_dev(out, scratch_state, metadata, b, row, index, compact, t, out.shape[2],
                         tid, tile)


@cuda.jit(device=True, inline=True)
def finish_counters_dev(state, plan, b, rid, num_misses, sigma, degraded, e_now, cursor, cbits,
                        record, flag, tid):
    """finish: the CLOCK cursor advances by ``min(misses, H)``, the epoch becomes E, the
    generation sigma (marked degraded if an insert failed), and the counters are reset."""
    cache_policy, scratch_state = state[1], state[3]
    n, hot = state[2].shape[0], cache_policy.shape[1]
    if tid == 0:
        scratch_state[0, COUNT_LAST * n + rid] = num_misses
        scratch_state[0, COUNT_WORK * n + rid] = 0
        scratch_state[0, COUNT_UNION * n + rid] = 0
        scratch_state[0, COUNT_GEN * n + rid] = pack_generation_dev(sigma, degraded or flag[0] != 0)
        cache_policy[0, rid] = pack_clock_dev(e_now, (cursor + min(num_misses, np.int64(hot))) % hot,
                                              cbits)
        if record:
            plan[2][b] = num_misses


@cuda.jit(device=True, inline=True)
def finish_request_dev(sel, pools, out, state, plan, work, rid, tail, tiles, copiers, committer,
                       record, victims, aux, scan, flag, cells):
    """The commit of request ``blockIdx.x`` by one whole tile, stage by stage (module docstring)."""
    b, tid, tile = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
    cache_index, cache_policy, scratch_locs, scratch_state, metadata = state
    n, cap, hot = scratch_locs.shape[0], scratch_locs.shape[1], cache_policy.shape[1]
    t = out.shape[1] * out.shape[2]
    cbits, ebits = clock_bits_dev(hot)
    packed = np.int64(load_coherent_dev(cache_policy, (0, rid)))
    e_now = next_epoch_dev(packed, cbits, ebits)
    cursor = (packed & MASK32) & ((1 << cbits) - 1)
    gen = np.int64(scratch_state[0, COUNT_GEN * n + rid])
    degraded = gen < 0
    sigma = next_sigma_dev(gen)
    if tid == 0:
        flag[0] = 0
    clear_cells_dev(cells, tid, tile)     # for the hash inserts, long after the next barrier
    if committer:
        # while the tiles classify: the commit then reads the banks and the slots from L1,
        # not through an L2 that the copier tiles' host reads keep busy
        scan[tid] = warm_l1_dev(cache_index, sel[2], sel[3], rid, hot, tid, tile) & 0x7FFFFFFF
    u0 = u1 = base = num_victims = np.int64(0)
    # scratch location tid, which tells whether miss tid needs a victim, read while waiting
    known_loc = scratch_locs[rid, tid] if tid < cap else np.int32(-1)
    # every tile has counted: the number of unique misses, and the union hits (added before)
    share = wait_for_tiles_dev(work[1], b, COUNTED, tiles, tid, tile)
    union_hits = np.int64(load_coherent_dev(scratch_state, (0, COUNT_UNION * n + rid)))
    _, num_misses = block_exclusive_scan_dev(scan, share, tid, tile)
    union_mode = num_misses + union_hits <= hot
    if union_mode:
        u0, u1, base, num_victims = victims_stage_dev(
            sel, state, b, rid, True, num_misses, union_hits, sigma, e_now, (1 << ebits) - 1,
            cursor, tail, degraded, known_loc, victims, aux, scan, flag, tid, tile)
    # every tile has numbered its misses. With copier tiles, the last tile indexes them before
    # it arrives, and the wait for the arrivals below covers both
    if copiers == 0:
        wait_for_tiles_dev(work[1], b, NUMBERED, tiles, tid, tile)
        index_misses_dev(metadata, scratch_state, work[2], work[3], work[6], work[7], b, rid + 1,
                         t, sigma, 0, num_misses, tid, tile)
        cuda.threadfence()
        cuda.syncthreads()
    # every tile has arrived (a tile holding later occurrences of a missed token reads their
    # scratch locations, which promotion swaps), and every copier tile has read the flags
    wait_for_arrivals_dev(work[0], b, tiles + copiers, committer, tid)
    reset_workspace_dev(work, b, tiles, tid, tile)
    if not union_mode:
        u0, u1, base, num_victims = victims_stage_dev(
            sel, state, b, rid, False, num_misses, union_hits, sigma, e_now, (1 << ebits) - 1,
            cursor, tail, degraded, known_loc, victims, aux, scan, flag, tid, tile)
    slots_stage_dev(sel, state, work, b, rid, sigma, union_mode, u0, u1, base, known_loc, victims,
                    aux, scan, tid)
    hash_insert_dev(cache_index, rid, sel[2], victims, num_victims, aux, flag, scan, cells, tid,
                    tile, True)
    if num_misses > cap:
        overflow_stage_dev(sel, pools, out, state, plan, b, rid, num_misses, record, tid, tile)
    finish_counters_dev(state, plan, b, rid, num_misses, sigma, degraded, e_now, cursor, cbits,
                        record, flag, tid)
