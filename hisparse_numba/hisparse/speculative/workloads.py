"""Test-only helpers of the speculative family: the compute-sanitizer workload and the ownership
invariant of the random sequences."""

import numpy as np

from hisparse_numba import device
from hisparse_numba.hisparse.speculative.examples import make_spec_problem, set_selection
from hisparse_numba.hisparse.speculative import load_cache_to_device_buffer_spec_mla


def owned_locations(snap: dict, rid: int) -> list:
    """The sorted physical locations request ``rid`` owns: hot slots plus scratch entries."""
    hot = snap["state.cache_policy"].shape[1]
    locs = np.concatenate([snap["device_buffer_locs"][rid, :hot], snap["state.scratch_locs"][rid]])
    return sorted(int(x) for x in locs if x >= 0)


def sanitizer_workload(hot=512, top_k=256, steps=4, tail=16, batch=3, version=None) -> None:
    """A few calls that exercise dedupe, union and approximate modes and direct overflow, for
    ``compute-sanitizer`` (memcheck / racecheck) on a GPU, on rung ``version`` (None: the tuned
    one)."""
    t = steps * top_k
    kw = make_spec_problem(batch=batch, steps=steps, top_k=top_k, hot=hot, tail=tail, item_words=72,
                           scratch_capacity=max(1, t - hot), max_positions=4 * (hot + t), record=True)
    rng = np.random.default_rng(1)
    for call in range(4):
        tokens = rng.integers(0, 4 * (hot + t) - 1, (batch, steps, top_k))
        tokens[:, 1:, : top_k // 2] = tokens[:, :1, : top_k // 2]  # cross-step repeats
        set_selection(kw, tokens, np.full(batch * steps, 4 * (hot + t)),
                      num_real_reqs=batch - (call % 2))
        load_cache_to_device_buffer_spec_mla(**kw, version=version)
    device.synchronize()
