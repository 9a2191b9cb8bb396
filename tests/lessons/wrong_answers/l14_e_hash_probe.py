"""Wrong answers to 14-e, the position hash's probe."""

import numpy as np

from hisparse_numba.device import cuda
from hisparse_numba.hisparse.single_step.hash import HASH_MULTIPLIER

from . import wrong

PUZZLE = "14-e"


def make_find(*, wrap=True, probe=True, compare_key=True, mask=True, lane=True):
    @cuda.jit(device=True, inline=True)
    def hash_find_dev(table, size, key):
        if mask:
            h = ((np.int64(key) * HASH_MULTIPLIER) & 0xFFFFFFFF) % size
        else:
            h = (np.int64(key) * HASH_MULTIPLIER) % size
        while True:
            entry = table[h]
            if entry == -1:
                return -1
            found = (entry >> 16) == key if compare_key else entry == key
            if found:
                return entry & 0xFFFF if lane else h
            if not probe:
                return -1
            h += 1
            if wrap and h == size:
                h = 0
    return hash_find_dev


NO_WRAP = wrong(make_find(wrap=False), 'case "wrap around the end"', "still running", simulator_only=True)
NO_PROBE = wrong(make_find(probe=False), "the lesson's example")
COMPARES_THE_ENTRY = wrong(make_find(compare_key=False), "the lesson's example")
NO_32_BIT_MASK = wrong(make_find(mask=False), "the lesson's example")
RETURNS_THE_ENTRY_INDEX = wrong(make_find(lane=False), "the lesson's example")
