"""The kv-canary hash chain, its constants, violation bits and launch tags.

Every canary row holds four int64 fields (token, position, prev_hash, real_kv_hash). The rows of
one request are linked in position order by a hash chain:

* ``H(x) = splitmix64(x)``: the splitmix64 *finaliser* on 64-bit unsigned values (no golden-ratio
  increment): ``splitmix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF``.
* ``mix3(a, b, c) = H(H(H(a) ^ b) ^ c)``.
* the chain head (position 0) stores ``H(CANARY_CHAIN_ANCHOR)``; every later slot stores
  ``mix3(pred.prev_hash, pred.token, pred.position)`` of its predecessor.

``real_kv_hash`` is not folded into the chain, so the chain depends on content only.

Host functions (``splitmix64``, ``mix3``) work on Python ints masked to 64 bits. The device
functions (``splitmix64_dev``, ``mix3_dev``) take and return ``uint64`` and keep every
operand ``uint64`` (an int64 operand would turn the expression into float64). Int64 fields are
converted with ``np.uint64(x)`` / ``np.int64(h)``, which reinterpret the two's-complement bits.

The chain is described in ``docs/kv-canary-behaviour.md#the-hash-chain``. Lesson 13 (capstone) recomputes it.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

import numpy as np


from ..device import SIMULATOR, cuda

U64_MASK = (1 << 64) - 1

CANARY_CHAIN_ANCHOR = 0xC0FFEE1234567890
REQ_POOL_IDX_PADDING = 0
TOKEN_TO_KV_SLOT_PADDING = 0

CANARY_FIELDS_PER_SLOT = 4
CANARY_FIELD_TOKEN = 0
CANARY_FIELD_POSITION = 1
CANARY_FIELD_PREV_HASH = 2
CANARY_FIELD_REAL_KV_HASH = 3
CANARY_SLOT_BYTES = CANARY_FIELDS_PER_SLOT * 8

VIOLATION_FIELDS = 8
VIOLATION_FIELD_KERNEL_KIND = 0
VIOLATION_FIELD_SLOT_IDX = 1
VIOLATION_FIELD_POSITION = 2
VIOLATION_FIELD_STORED_TOKEN = 3
VIOLATION_FIELD_EXPECTED_TOKEN = 4
VIOLATION_FIELD_STORED_CHAIN_HASH = 5
VIOLATION_FIELD_EXPECTED_AUX = 6
VIOLATION_FIELD_FAIL_REASON_BITS = 7

MAX_REAL_KV_SOURCES = 4


class FailReason(IntFlag):
    """Bits of a violation row's ``fail_reason_bits`` field."""

    VERIFY_CHAIN_HASH_MISMATCH = 1
    VERIFY_POSITION_MISMATCH = 2
    VERIFY_REAL_KV_HASH_MISMATCH = 4
    WRITE_TOKEN_MISMATCH = 8
    WRITE_POSITION_MISMATCH = 16
    VERIFY_TOKEN_MISMATCH = 32


class RealKvHashMode(IntEnum):
    """How many real-KV bytes of a slot are folded into ``real_kv_hash``."""

    NONE = 0
    PARTIAL = 1  # the first 16 bytes of each source
    ALL = 2  # ``read_bytes`` of each source


class CanaryLaunchTag(IntEnum):
    """(HEAD | TAIL | SWEEP) x (K | V) x (FULL | SWA): stamped into every violation row."""

    HEAD_K_FULL = 0
    HEAD_V_FULL = 1
    TAIL_K_FULL = 2
    TAIL_V_FULL = 3
    SWEEP_K_FULL = 4
    SWEEP_V_FULL = 5
    HEAD_K_SWA = 6
    HEAD_V_SWA = 7
    TAIL_K_SWA = 8
    TAIL_V_SWA = 9
    SWEEP_K_SWA = 10
    SWEEP_V_SWA = 11


# ---------------------------------------------------------------------------------------------
# Host (Python int) versions: the oracle.


def splitmix64(x: int) -> int:
    """The splitmix64 finaliser of ``x`` (taken modulo 2**64), as a Python int in [0, 2**64)."""
    z = int(x) & U64_MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64_MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64_MASK
    return z ^ (z >> 31)


def mix3(a: int, b: int, c: int) -> int:
    """``H(H(H(a) ^ b) ^ c)`` with every input taken modulo 2**64 (negative ints as two's complement)."""
    acc = splitmix64(a)
    acc = splitmix64(acc ^ (int(b) & U64_MASK))
    return splitmix64(acc ^ (int(c) & U64_MASK))


def to_signed64(x: int) -> int:
    """The int64 that has the same 64 bits as ``x``."""
    x = int(x) & U64_MASK
    return x - (1 << 64) if x >> 63 else x


CHAIN_HEAD_HASH = splitmix64(CANARY_CHAIN_ANCHOR)  # 0xDE7FAE23A9A1B716


def chain_hashes(tokens, positions, seed_hash: int = CHAIN_HEAD_HASH) -> list[int]:
    """The ``prev_hash`` values a request's consecutive slots store, starting from ``seed_hash``."""
    out, h = [], seed_hash
    for tok, pos in zip(tokens, positions):
        out.append(h)
        h = mix3(h, tok, pos)
    return out


# ---------------------------------------------------------------------------------------------
# Device versions. Constants are module globals of type uint64 (frozen into the kernel).

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
CHAIN_HEAD_HASH_U64 = np.uint64(CHAIN_HEAD_HASH)

if SIMULATOR:
    # The simulator runs kernels as Python on NumPy scalars, whose uint64 multiply warns on the
    # (intended) wrap-around; do the product on Python ints instead.
    @cuda.jit(device=True)
    def _mul_wrap_dev(a, b):
        return np.uint64((int(a) * int(b)) & U64_MASK)

else:

    @cuda.jit(device=True, inline=True)
    def _mul_wrap_dev(a, b):
        return a * b


@cuda.jit(device=True, inline=True)
def splitmix64_dev(x):
    """splitmix64 finaliser of a uint64 (returns uint64)."""
    z = x
    z = _mul_wrap_dev(z ^ (z >> _S30), _M1)
    z = _mul_wrap_dev(z ^ (z >> _S27), _M2)
    return z ^ (z >> _S31)


@cuda.jit(device=True, inline=True)
def mix3_dev(a, b, c):
    """``mix3`` of three int64 canary fields (reinterpreted as uint64); returns uint64."""
    acc = splitmix64_dev(np.uint64(a))
    acc = splitmix64_dev(acc ^ np.uint64(b))
    return splitmix64_dev(acc ^ np.uint64(c))


@cuda.jit(device=True, inline=True)
def slot_hash_dev(buf, slot):
    """The prev_hash the successor of canary row ``slot`` must store; ``H(anchor)`` for ``slot < 0``."""
    if slot < 0:
        return CHAIN_HEAD_HASH_U64
    return mix3_dev(buf[slot, CANARY_FIELD_PREV_HASH], buf[slot, CANARY_FIELD_TOKEN],
                       buf[slot, CANARY_FIELD_POSITION])


@cuda.jit(device=True, inline=True)
def as_int64_dev(h):
    """The int64 with the bits of uint64 ``h`` (for storing into int64 arrays)."""
    return np.int64(h)
