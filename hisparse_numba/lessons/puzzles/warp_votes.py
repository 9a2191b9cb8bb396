"""Warp votes in the CUDA simulator: ``cuda.ballot_sync``, ``any_sync``, ``all_sync``, ``activemask``.

Numba's simulator has no warp intrinsics; lesson 15's vote puzzle needs them. :func:`install` adds
them to the simulator's ``cuda`` module seen inside kernels (nothing changes on a GPU, where Numba
compiles the real ones). A vote is modelled as a block-wide meeting: each thread posts its
predicate, waits at a barrier, reads its warp's 32 posts, and waits again. So, in the simulator,
every thread of the block must reach the vote, the same number of times (on a GPU, every lane the
mask names must). A lane named in the mask that did not reach the vote (it returned early, took
another branch, or does not exist) raises an error saying so: on a GPU that is undefined
behaviour, a hang or a wrong answer. As on a GPU, ``ballot_sync`` returns a signed 32-bit integer
(all 32 lanes voting True give -1), ``activemask`` an unsigned one.
"""

from __future__ import annotations

import threading

from ... import device

WARP = 32


class DivergentVote(RuntimeError):
    """A lane named in a vote's mask did not reach the vote (the learner's kernel, not a caller's call)."""


def _post(manager, thread, predicate) -> int:
    votes = manager.__dict__.setdefault("_puzzle_votes", {})
    count = getattr(thread, "_puzzle_vote_count", 0) + 1
    thread._puzzle_vote_count = count
    votes[thread.thread_id] = (count, bool(predicate))
    return count


def _ballot(mask, predicate) -> int:
    thread = threading.current_thread()
    manager = thread._manager
    count = _post(manager, thread, predicate)
    thread.syncthreads()
    votes = manager._puzzle_votes
    warp = thread.thread_id // WARP
    bits = 0
    for lane in range(WARP):
        if not (int(mask) >> lane) & 1:
            continue
        posted = votes.get(warp * WARP + lane)
        if posted is None or posted[0] != count:
            raise DivergentVote(
                f"lane {lane} of warp {warp} is in the vote's mask {int(mask):#x} but did not reach "
                "this warp vote (it returned early, is on another branch, or does not exist): a "
                "divergent vote, like a barrier that not every thread reaches. Let every lane vote "
                "(a lane with nothing to say votes False)")
        if posted[1]:
            bits |= 1 << lane
    thread.syncthreads()
    return bits


def ballot_sync(self, mask, predicate):
    """As Numba types it on a GPU: a signed 32-bit integer, lane 31's bit its sign."""
    bits = _ballot(mask, predicate)
    return bits - (1 << 32) if bits >> 31 else bits


def any_sync(self, mask, predicate):
    return int(_ballot(mask, predicate) != 0)


def all_sync(self, mask, predicate):
    return int(_ballot(mask, predicate) == int(mask) & 0xFFFFFFFF)


def activemask(self):
    """The lanes of this thread's warp that exist in the block (the simulator cannot see more)."""
    thread = threading.current_thread()
    threads = 1
    for d in thread._manager._block_dim:
        threads *= d
    first = thread.thread_id // WARP * WARP
    return (1 << min(WARP, threads - first)) - 1


def install() -> None:
    """Give the simulator's in-kernel ``cuda`` module the warp votes (once; only in the simulator)."""
    if not device.SIMULATOR:
        return
    from .. import simtrace

    simtrace.infrastructure(__file__)    # a vote's barriers are the kernel line that votes
    fake = device.cuda.kernelapi.FakeCUDAModule
    for name, fn in (("ballot_sync", ballot_sync), ("any_sync", any_sync), ("all_sync", all_sync),
                     ("activemask", activemask)):
        if not hasattr(fake, name):
            setattr(fake, name, fn)
