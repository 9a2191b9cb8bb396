"""Version 3, tuned: a committer tile commits while the tiles still work, and copier tiles read the
misses from the host before they are numbered (batch 1 and 8 at sglang's sizes, where SMs idle).

What it adds to version 2 (``v2_tiles``), each measured on the GPU (docs/performance.md):

* when every block fits on the SMs at once (``committer_tile``), each request gets one more tile,
  the *committer*: it takes the last ticket, resolves nothing, and runs the commit's stages
  (``finish.py``) as soon as the tiles reach them, so the victims overlap the numbering; it warms
  its SM's L1 with the request's hash banks and hot slots while it waits;
* when SMs are still idle beside a committer (``copier_tiles``), *copier tiles* take the tickets
  between the tiles and the committer: their warps hold one listed item each in registers from
  the moment the tiles have claimed (``copiers.py``), and the last tile indexes the misses;
* the kernel's first loads (gate, real row, request row, clock, generation) are issued together.

``swap_kernel(reps, committer, record)`` builds the kernel for one compile-time configuration;
grid ``(batch, tiles [+ copiers + 1 committer])`` x ``tile`` threads. Sizes are runtime values
read from the arrays, so one compiled kernel serves every size. Lessons 01, 03, 04 and 08 launch
it through ``launch.py`` (the default version).
"""

from __future__ import annotations

import functools

import numpy as np

from ...device import cuda, jit_kernel
from ...itemcopy import copy_items_flat_dev
from ...value_flags import gate_closed_dev
from ..limits import MAX_OCCURRENCES
from .copiers import copy_share_dev
from .device_fns import MAX_THREADS
from .finish import finish_request_dev
from .hash import SETTLE_CELLS
from .state import COUNT_GEN, clock_bits_dev, next_epoch_dev, next_sigma_dev
from .tiles import classify_tile_dev, count_tile_dev, duplicates_tile_dev, number_tile_dev
from .tiling import launch_tiled, padded_row_dev


@functools.cache
def swap_kernel(reps: int, committer: bool, record: bool):
    """The swap kernel: each thread resolves ``reps`` consecutive occurrences; one committer tile
    per request when ``committer``; the miss plan is written when ``record``."""

    @jit_kernel(max_threads=MAX_THREADS)
    def swap(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_words,
             dev_words, out, req_pool_indices, seq_lens, cache_index, cache_policy, scratch_locs,
             scratch_state, metadata, num_real_reqs, miss_src, miss_dst, miss_count, counters,
             flags, claim_keys, claim_first, claim_unique, claim_dst, unique_token, unique_claim,
             copy_src, copy_dst, words_per_item, tail, n, gate):
        b = cuda.blockIdx.x
        # three independent loads in flight together (req_pool_indices has the grid's batch
        # rows, so rid is read in bounds; it is used only once the gate is known to be open)
        closed = gate_closed_dev(gate)      # the call's value check rejected it
        real = b < num_real_reqs[0]
        rid = req_pool_indices[b]
        tid, tile = cuda.threadIdx.x, cuda.blockDim.x
        t = top_k_tokens.shape[1] * top_k_tokens.shape[2]
        if closed or not real:      # one branch on both loads, so neither waits for the other
            if not closed:
                padded_row_dev(out, miss_count, b, reps, record, tid, tile)
            return
        tiles = -(-t // (tile * reps))      # tiles per request
        copiers = cuda.gridDim.y - tiles - 1 if committer else 0
        shared = cuda.shared.array(6, np.int32)   # see tiles.py
        scan = cuda.shared.array(MAX_THREADS, np.int32)
        victims = cuda.shared.array(MAX_OCCURRENCES, np.int16)  # per victim ordinal: its slot, -1 = none yet
        aux = cuda.shared.array(MAX_OCCURRENCES, np.int16)      # walk positions, fallback list, hash-insert state
        flag = cuda.shared.array(2, np.int32)     # hash degraded, a proposal this round
        cells = cuda.shared.array(SETTLE_CELLS, np.int32)   # the hash inserts' settle table
        claim = cuda.local.array(reps, np.int32)   # claim position of a missed occurrence, or -1
        token = cuda.local.array(reps, np.int32)
        host_src = cuda.local.array(reps, np.int64)   # host location of a missed occurrence
        is_first = cuda.local.array(reps, np.int32)
        if tid == 0:
            # tiles take their index from a ticket, so a tile only ever waits for tiles that started
            shared[0] = cuda.atomic.add(counters, (b, 0), 1)
            for j in range(1, 6):
                shared[j] = 0
        # the request's clock and generation, in flight with the ticket (the commit writes them
        # only after every tile has arrived)
        packed_clock = np.int64(cache_policy[0, rid])
        gen = np.int64(scratch_state[0, COUNT_GEN * n + rid])
        cuda.syncthreads()
        y = shared[0]
        first = (y * tile + tid) * reps          # this thread's occurrences: first .. first+reps-1
        cbits, ebits = clock_bits_dev(cache_policy.shape[1])
        sel = (top_k_tokens, seq_lens, device_buffer_tokens, device_buffer_locs, host_cache_locs)
        state = (cache_index, cache_policy, scratch_locs, scratch_state, metadata)
        work = (counters, flags, claim_keys, claim_first, claim_unique, claim_dst, unique_token,
                unique_claim, copy_src, copy_dst)
        plan = (miss_src, miss_dst, miss_count)
        is_committer = committer and y == tiles + copiers
        base = num_copies = 0
        if committer and y >= tiles and not is_committer:   # (compiled only with a committer)
            copy_share_dev(host_words, dev_words, counters, flags, claim_dst, copy_src, copy_dst,
                           b, t, tiles, reps, y - tiles, copiers, words_per_item, tid, tile, scan)
            return
        if not is_committer:   # (the committer took the last ticket: every tile has started)
            sigma = next_sigma_dev(gen)
            classify_tile_dev(sel, state, work, out, b, rid, first, y,
                              next_epoch_dev(packed_clock, cbits, ebits), sigma, gen < 0, tail, n,
                              reps, copiers, shared, claim, token, host_src, is_first, tid)
            rank, num_first, base = count_tile_dev(work, b, first, y, reps, claim, is_first,
                                                   shared, scan, tid, tile)
            num_copies = number_tile_dev(work, plan, out, scratch_locs, scratch_state, b, rid, t,
                                         n, base, rank, num_first, first, reps, record, copiers,
                                         claim, token, host_src, is_first, scan, tid, tile)
            duplicates_tile_dev(work, state, out, b, rid, t, sigma, y, tiles, first, reps, base,
                                num_first, committer, copiers, claim, is_first, shared, tid, tile)
        cuda.syncthreads()
        # the committer, or without one the last tile to arrive, finishes the request (copy
        # destinations were read above, before the commit can swap scratch locations)
        if is_committer or shared[3] == 1:
            finish_request_dev(sel, (host_words, dev_words, words_per_item), out, state, plan,
                               work, rid, tail, tiles, copiers, committer, record, victims, aux,
                               scan, flag, cells)
        # copy: this tile's scratch misses, host -> scratch locations (none with copier tiles)
        start = b * t + base
        copy_items_flat_dev(host_words, copy_src, start, dev_words, copy_dst, start, num_copies,
                            words_per_item, tid, tile)

    return swap


def launch(call) -> None:
    """Launch version 3 on a checked ``SpecCall``: a committer and copier tiles where they fit."""
    launch_tiled(call, swap_kernel, committer_allowed=True)
