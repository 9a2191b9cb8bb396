"""Value checks of the speculative state's calls: Python scalars, array arguments, and the
device-side check of ``initialize_hisparse_spec_state``'s request indices.

The initialiser indexes every state tensor with ``req_pool_indices[i]``, so each must be a request
slot in ``[0, n)`` and no slot may appear twice (two blocks would reset and index the same request
at once). That verdict needs the indices' values, which live on the device: one launch of
``initialize_check_kernel`` (one thread per index, a claim per request slot in a
``value_flags.claim_table``, atomics into the stream's small flags buffer), whose last block writes
the verdict, instead of copying the indices to the host. ``initialize_checks_reference`` computes
the same verdict in NumPy. Lessons 01, 03, 04 and 08 build states that pass these checks.
"""

from __future__ import annotations

import numpy as np

from ... import device, value_flags
from ...checks import fail
from ...device import cuda
from ...value_flags import claim_epoch_dev, finish_check_dev, flag_bad_dev

CHECK_THREADS = 128
# conditions of the initialiser's check (value_flags.start_check)
INIT_OUTSIDE, INIT_DUPLICATE = 0, 1


# ---------------------------------------------------------------------------------------------
# The initialiser's request indices: reference, kernel, verdict.

def initialize_checks_reference(req_pool_indices, num_requests: int) -> list:
    """``[(count, first), ...]`` as ``value_flags.check_flags`` returns it: condition INIT_OUTSIDE
    counts indices outside ``[0, n)`` (first = smallest position), INIT_DUPLICATE counts repeats
    of a slot beyond its first (first = smallest repeated slot)."""
    rids = np.asarray(req_pool_indices).astype(np.int64)
    verdict = [(0, -1)] * value_flags.CHECK_CONDITIONS
    outside = np.flatnonzero((rids < 0) | (rids >= num_requests))
    if outside.size:
        verdict[INIT_OUTSIDE] = (int(outside.size), int(outside[0]))
    inside = rids[(rids >= 0) & (rids < num_requests)]
    slots, counts = np.unique(inside, return_counts=True)
    if (counts > 1).any():
        verdict[INIT_DUPLICATE] = (int((counts - 1).sum()), int(slots[counts > 1][0]))
    return verdict


@cuda.jit(device=True, inline=True)
def initialize_check_dev(req_pool_indices, num_requests, claims, flags):
    epoch = claim_epoch_dev(flags)
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= req_pool_indices.shape[0]:
        return
    rid = req_pool_indices[i]
    if rid < 0 or rid >= num_requests:
        flag_bad_dev(flags, INIT_OUTSIDE, i)
    elif cuda.atomic.exch(claims, rid, epoch) == epoch:
        flag_bad_dev(flags, INIT_DUPLICATE, rid)


@cuda.jit
def initialize_check_kernel(req_pool_indices, num_requests, claims, flags, verdict):
    initialize_check_dev(req_pool_indices, num_requests, claims, flags)
    finish_check_dev(flags, verdict)


def start_initialize_check(req_pool_indices, num_requests: int) -> value_flags.ValueCheck:
    """Enqueue :func:`initialize_check_kernel` over ``req_pool_indices`` (at least one index); the
    initialiser's kernel waits behind its gate."""
    k = int(req_pool_indices.shape[0])
    return value_flags.start_check(initialize_check_kernel, -(-k // CHECK_THREADS), CHECK_THREADS,
                                   req_pool_indices, num_requests, value_flags.claim_table(num_requests))


def raise_initialize_flags(verdict, call) -> None:
    """The ``ValueError`` of the first failed condition of ``verdict`` for the initialiser's
    ``call`` (reads the offending index back)."""
    num_requests, req_pool_indices = call.num_requests, call.req_pool_indices
    count, first = verdict[INIT_OUTSIDE]
    if count:
        value = int(device.to_host(req_pool_indices[first:first + 1])[0])
        fail(f"req_pool_indices[{first}] = {value} is outside [0, {num_requests}) (the state's "
             f"request slots); {count} entries are")
    count, first = verdict[INIT_DUPLICATE]
    if count:
        fail(f"req_pool_indices holds request slot {first} more than once; the indices must be "
             "distinct (each block resets the request it names)")
