"""The shared-memory hash of a row's selected positions, used by the swap-in kernel and its check.

Open addressing over ``size = 2K`` int64 entries, one entry ``position << 16 | lane`` (positions
are >= 0, lanes < 2**16), ``HASH_EMPTY`` for a free entry; Knuth's multiplicative hash, as sglang.
At most K keys go into 2K entries, so every probe sequence meets a free entry and ends.
"""

from __future__ import annotations

import numpy as np

from ...device import cuda

HASH_MULTIPLIER = 2654435761  # Knuth's multiplicative hash, as sglang
HASH_EMPTY = -1
LANE_BITS = 16


@cuda.jit(device=True, inline=True)
def hash_slot_dev(key, size):
    return ((np.int64(key) * HASH_MULTIPLIER) & 0xFFFFFFFF) % size


@cuda.jit(device=True, inline=True)
def hash_insert_dev(s_hash, size, key, lane):
    """Insert ``key -> lane``; False (and nothing inserted) when ``key`` is there already."""
    h = hash_slot_dev(key, size)
    entry = (np.int64(key) << LANE_BITS) | lane
    while True:
        old = cuda.atomic.cas(s_hash, h, HASH_EMPTY, entry)
        if old == HASH_EMPTY:
            return True
        if (old >> LANE_BITS) == key:
            return False
        h += 1
        if h == size:
            h = 0


@cuda.jit(device=True, inline=True)
def hash_find_dev(s_hash, size, key):
    """The lane that selected ``key``, or -1."""
    h = hash_slot_dev(key, size)
    while True:
        entry = s_hash[h]
        if entry == HASH_EMPTY:
            return -1
        if (entry >> LANE_BITS) == key:
            return entry & 0xFFFF
        h += 1
        if h == size:
            h = 0
