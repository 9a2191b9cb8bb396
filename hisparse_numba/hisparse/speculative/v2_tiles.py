"""Version 2, tiles: a request's occurrences are cut into tiles, one block each, that meet through
the request's ticket, flags and arrival counter, so a request fills many SMs; the last tile to
arrive commits it.

Version 1 gives a request one block: at batch 1 one SM does all of it while the others idle.
Here a request's ``T = steps * top_k`` occurrences go to ``tiles`` blocks of ``tile * reps``
(``tiling.geometry``). The stages are the same as version 1's, cut where the tiles must meet:

1. classify (``tiles.classify_tile_dev``), then publish CLAIMED;
2. count: a tile's first occurrences of missed tokens, once the earlier tiles have claimed,
   ranked by a block scan plus the earlier tiles' counts (publish COUNTED);
3. number: outputs, plan entries and copy lists by ``unique_idx`` (publish NUMBERED);
4. duplicates: later occurrences of a missed token take its first one's location; arrive;
5. finish: the last tile to arrive commits the request (``finish.finish_request_dev``);
6. copy: every tile copies its listed scratch misses from the host.

``swap_kernel(reps, record)`` builds the kernel; it takes the same arguments as version 3's.
"""

from __future__ import annotations

import functools

import numpy as np

from ...device import cuda, jit_kernel
from ...itemcopy import copy_items_flat_dev
from ...value_flags import gate_closed_dev
from ..limits import MAX_OCCURRENCES
from .device_fns import MAX_THREADS
from .finish import finish_request_dev
from .hash import SETTLE_CELLS
from .state import COUNT_GEN, clock_bits_dev, next_epoch_dev, next_sigma_dev
from .tiles import classify_tile_dev, count_tile_dev, duplicates_tile_dev, number_tile_dev
from .tiling import launch_tiled, padded_row_dev


@functools.cache
def swap_kernel(reps: int, record: bool):
    """The tiled swap kernel: each thread resolves ``reps`` consecutive occurrences; the miss plan
    is written when ``record``."""

    @jit_kernel(max_threads=MAX_THREADS)
    def swap(top_k_tokens, device_buffer_tokens, host_cache_locs, device_buffer_locs, host_words,
             dev_words, out, req_pool_indices, seq_lens, cache_index, cache_policy, scratch_locs,
             scratch_state, metadata, num_real_reqs, miss_src, miss_dst, miss_count, counters,
             flags, claim_keys, claim_first, claim_unique, claim_dst, unique_token, unique_claim,
             copy_src, copy_dst, words_per_item, tail, n, gate):
        b, tid, tile = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
        t = top_k_tokens.shape[1] * top_k_tokens.shape[2]
        if gate_closed_dev(gate):           # the call's value check rejected it
            return
        if b >= num_real_reqs[0]:
            padded_row_dev(out, miss_count, b, reps, record, tid, tile)
            return
        rid = req_pool_indices[b]
        tiles = -(-t // (tile * reps))
        shared = cuda.shared.array(6, np.int32)   # see tiles.py
        scan = cuda.shared.array(MAX_THREADS, np.int32)
        victims = cuda.shared.array(MAX_OCCURRENCES, np.int16)
        aux = cuda.shared.array(MAX_OCCURRENCES, np.int16)
        flag = cuda.shared.array(2, np.int32)
        cells = cuda.shared.array(SETTLE_CELLS, np.int32)
        claim = cuda.local.array(reps, np.int32)      # claim position of a missed occurrence, or -1
        token = cuda.local.array(reps, np.int32)
        host_src = cuda.local.array(reps, np.int64)
        is_first = cuda.local.array(reps, np.int32)
        if tid == 0:
            shared[0] = cuda.atomic.add(counters, (b, 0), 1)   # this tile's index: a ticket
            for j in range(1, 6):
                shared[j] = 0
        cuda.syncthreads()
        y = shared[0]
        first = (y * tile + tid) * reps
        cbits, ebits = clock_bits_dev(cache_policy.shape[1])
        e_now = next_epoch_dev(np.int64(cache_policy[0, rid]), cbits, ebits)
        gen = np.int64(scratch_state[0, COUNT_GEN * n + rid])
        sigma = next_sigma_dev(gen)
        sel = (top_k_tokens, seq_lens, device_buffer_tokens, device_buffer_locs, host_cache_locs)
        state = (cache_index, cache_policy, scratch_locs, scratch_state, metadata)
        work = (counters, flags, claim_keys, claim_first, claim_unique, claim_dst, unique_token,
                unique_claim, copy_src, copy_dst)
        plan = (miss_src, miss_dst, miss_count)
        classify_tile_dev(sel, state, work, out, b, rid, first, y, e_now, sigma, gen < 0, tail, n,
                          reps, 0, shared, claim, token, host_src, is_first, tid)
        rank, num_first, base = count_tile_dev(work, b, first, y, reps, claim, is_first, shared,
                                               scan, tid, tile)
        num_copies = number_tile_dev(work, plan, out, scratch_locs, scratch_state, b, rid, t, n,
                                     base, rank, num_first, first, reps, record, 0, claim, token,
                                     host_src, is_first, scan, tid, tile)
        duplicates_tile_dev(work, state, out, b, rid, t, sigma, y, tiles, first, reps, base,
                            num_first, False, 0, claim, is_first, shared, tid, tile)
        cuda.syncthreads()
        if shared[3] == 1:
            finish_request_dev(sel, (host_words, dev_words, words_per_item), out, state, plan,
                               work, rid, tail, tiles, 0, False, record, victims, aux, scan, flag,
                               cells)
        start = b * t + base
        copy_items_flat_dev(host_words, copy_src, start, dev_words, copy_dst, start, num_copies,
                            words_per_item, tid, tile)

    return swap


def launch(call) -> None:
    """Launch version 2 on a checked ``SpecCall``: tiles only, the last to arrive commits."""
    launch_tiled(call, swap_kernel, committer_allowed=False)
