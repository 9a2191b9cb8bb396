"""bench spec's batch-1 problem for the stamped copies of the speculative kernel (developer
tooling): ``tl_run.py`` and ``tl_graph.py`` set it up here and launch their kernel with
``launch(problem, swap, stamps)``."""
import os, time
from types import SimpleNamespace
import numpy as np
from hisparse_numba import device
from hisparse_numba.bench.spec import (selections, NUM_STEPS, TOP_K, HOT, PAGE, ITEM_WORDS, SCRATCH,
                                       MISS_ADVANCE, MISS_PER_STEP)
from hisparse_numba.bench.startup import spec_call
from hisparse_numba.hisparse.speculative.examples import make_spec_problem, set_selection, snapshot, wrong_items
from hisparse_numba.hisparse.speculative import check_speculative
from hisparse_numba.hisparse.speculative import launch as L


def batch1_problem(calls):
    """The problem, ``calls`` selections of bench spec's cycle (``sel``) and the launch geometry;
    prints the geometry."""
    batch = 1
    sel = device.xp.asarray(selections(batch, calls + 1))
    positions = HOT + (calls + 1) * MISS_ADVANCE + 4 * MISS_PER_STEP + 16
    kw = make_spec_problem(batch=batch, steps=NUM_STEPS, top_k=TOP_K, hot=HOT, tail=PAGE,
                           item_words=ITEM_WORDS, scratch_capacity=SCRATCH, max_positions=positions,
                           record=True)
    set_selection(kw, device.to_host(sel[0]), np.full(batch * NUM_STEPS, positions))
    call = check_speculative(**spec_call(kw))
    t = call.steps * call.top_k
    tile, reps, tiles, committer = L.geometry(call.batch, t)
    copiers = L.copier_tiles(call.batch, tiles, committer)
    print(f"tile {tile} reps {reps} tiles {tiles} copiers {copiers} committer {committer}", flush=True)
    return SimpleNamespace(kw=kw, sel=sel, call=call, tile=tile, reps=reps, tiles=tiles,
                           committer=committer, copiers=copiers, Y=tiles + copiers + committer,
                           work=L.workspace(call.batch, t))


def launch(p, swap, stamps):
    """One launch of a stamped copy of the kernel on the problem's current selection."""
    device.launch(swap, (p.call.batch, p.Y), p.tile, *L.kernel_args(p.call, p.work), stamps)


def wait_for_bench():
    """Wait (at most 600 s) for ``$OUT/bench_done``: a bench in the same device call must finish
    before anything is timed."""
    flag = os.path.join(os.environ.get("OUT", "."), "bench_done")
    for _ in range(600):
        if os.path.exists(flag):
            return
        time.sleep(1)


def wrong_items_count(p):
    return len(wrong_items(snapshot(p.kw), ITEM_WORDS))
