"""The copier tiles of the tuned speculative kernel (``v3_tuned``): host reads started before the
misses are numbered.

When a request's tiles leave SMs idle (batch 1 at sglang's sizes), the launch adds copier tiles
between the tiles and the committer. Each waits until every tile has CLAIMED its missed tokens;
its loader warps then read one listed item each from the host into registers while the tiles are
still numbering, and write it to its scratch destination once NUMBERED says where it goes.
docs/speculative-swap-in.md, "Where the time goes at batch 1", measures why.
"""

from __future__ import annotations

import numpy as np

from ...device import cuda
from ...itemcopy import copy_item_dev
from .device_fns import (CLAIMED, HOLD_WORDS, LANES, NUMBERED, load_coherent_dev,
                         wait_for_tiles_dev, warp_wait_for_tiles_dev)


@cuda.jit(device=True, inline=True)
def list_entry_dev(lists, tiles, g, b, t, reps):
    """Where item ``g`` of the request's miss list is: tile ``j`` listed ``lists[j]`` items at
    ``b * T + j * tile * reps``, in tile order."""
    for j in range(tiles):
        if g < lists[j]:
            return b * t + j * cuda.blockDim.x * reps + g
        g -= lists[j]
    return -1

@cuda.jit(device=True, inline=True)
def copy_share_dev(host_words, dev_words, counters, flags, claim_dst, copy_src, copy_dst, b, t,
                   tiles, reps, copier, copiers, words_per_item, tid, tile, lists):
    """Copier tile ``copier`` of ``copiers``. Once every tile of request ``b`` has CLAIMED,
    the request's unique misses are listed (host location, claim position; the thread that
    inserted the token listed it): each loader warp reads one item from the host into its
    registers at once (item ``copier + copiers * loader``), long before the tiles have
    numbered the misses. The first warp waits for NUMBERED, tells the loaders and arrives, so
    that the committer resets the flags only after that. A loader then writes its item to
    its destination (``claim_dst``, read by the tiles before any promotion), and copies the
    items no loader held. With a one-warp tile, that warp does all of it. ``lists`` (shared,
    > tiles + 2) takes each tile's number of listed misses, then two counters."""
    wait_for_tiles_dev(flags, b, CLAIMED, tiles, tid, tile)
    j = tid
    while j < tiles:
        lists[j] = load_coherent_dev(flags, (b, CLAIMED, j)) - 1
        j += tile
    if tid == 0:
        lists[tiles] = 0           # tiles seen NUMBERED
        lists[tiles + 1] = 0       # 1 once every tile has NUMBERED
    cuda.syncthreads()
    num_misses = 0
    for j in range(tiles):
        num_misses += lists[j]
    warp, lane = tid // LANES, tid % LANES
    warps = tile // LANES
    loaders = max(1, warps - 1)
    loader = warp - 1 if warps > 1 else 0
    is_loader = warps == 1 or warp > 0
    held = cuda.local.array(HOLD_WORDS, np.int64)
    holds = words_per_item <= HOLD_WORDS * LANES
    entry = np.int64(-1)
    g = copier + copiers * loader
    if is_loader and holds and g < num_misses:
        entry = list_entry_dev(lists, tiles, g, b, t, reps)
        src = copy_src[entry] * words_per_item
        for h in range(HOLD_WORDS):      # a fixed trip count: held stays in registers
            w = lane + h * LANES
            if w < words_per_item:
                held[h] = host_words[src + w]
    if warp == 0:
        warp_wait_for_tiles_dev(flags, b, NUMBERED, tiles, lane, lists, tiles)
        if lane == 0:
            cuda.atomic.exch(lists, tiles + 1, 1)
            cuda.atomic.add(counters, (b, 1), 1)     # done with the flags
    if not is_loader:
        return
    while cuda.atomic.add(lists, tiles + 1, 0) == 0:
        pass
    if entry >= 0:
        dst = np.int64(load_coherent_dev(claim_dst, (b, copy_dst[entry])))
        if dst >= 0:
            dst *= words_per_item
            for h in range(HOLD_WORDS):
                w = lane + h * LANES
                if w < words_per_item:
                    dev_words[dst + w] = held[h]
    g = (loaders * copiers if holds else 0) + copier * loaders + loader
    while g < num_misses:
        entry = list_entry_dev(lists, tiles, g, b, t, reps)
        dst = np.int64(load_coherent_dev(claim_dst, (b, copy_dst[entry])))
        if dst >= 0:
            copy_item_dev(host_words, copy_src[entry], dev_words, dst, words_per_item, lane,
                          LANES)
        g += loaders * copiers
