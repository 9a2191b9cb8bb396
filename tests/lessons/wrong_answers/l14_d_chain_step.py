"""Wrong answers to 14-d, the kv-canary hash chain step."""

import numpy as np

from hisparse_numba.device import cuda
from hisparse_numba.kv_canary.hashing import splitmix64_dev

from . import wrong

PUZZLE = "14-d"


@cuda.jit(device=True, inline=True)
def xor_before_the_first_round(a, b, c):
    acc = splitmix64_dev(np.uint64(a) ^ np.uint64(b))
    return splitmix64_dev(acc ^ np.uint64(c))


@cuda.jit(device=True, inline=True)
def position_before_token(a, b, c):
    acc = splitmix64_dev(np.uint64(a))
    acc = splitmix64_dev(acc ^ np.uint64(c))
    return splitmix64_dev(acc ^ np.uint64(b))


@cuda.jit(device=True, inline=True)
def no_cast(a, b, c):
    acc = splitmix64_dev(np.uint64(a))
    acc = splitmix64_dev(acc ^ b)            # uint64 ^ int64: not a uint64 any more
    return splitmix64_dev(acc ^ c)


@cuda.jit(device=True, inline=True)
def two_rounds(a, b, c):
    acc = splitmix64_dev(np.uint64(a) ^ np.uint64(b))
    return acc ^ np.uint64(c)


XOR_BEFORE_THE_FIRST_ROUND = wrong(xor_before_the_first_round, "next_hash[0]")
POSITION_BEFORE_TOKEN = wrong(position_before_token, "next_hash[")
NO_CAST = wrong(no_cast, "the lesson's example")
TWO_ROUNDS = wrong(two_rounds, "next_hash[0]")
