"""Graph-replay timeline of the speculative kernel at bench spec's batch-1 problem (developer tooling).

Runs ``tl_bare.py`` (``make_tl.py`` writes it: the kernel with only its first block's entry and its
last block's exit stamped) the way ``bench spec`` measures ``graph_us``: ``TL_CALLS`` calls (default
24), each a selection copy and a launch, captured in one CUDA graph and replayed ``TL_REPLAYS``
times (default 4); each call stamps its own row. For the last replay it prints every call's span
(first entry to last exit), the gap from its last exit to the next call's first entry, and the
period (entry to next entry), then their means: the mean period is what ``graph_us`` measures
(plus the copy of the selection and the two barriers the stamps add), and the mean gap is what a
faster kernel body cannot remove. From the second launch on it waits for ``$OUT/bench_done``, as
``tl_run.py`` does."""
import importlib, os
import numpy as np
from hisparse_numba import device
from hisparse_numba.graphs import capture_graph
from tl_problem import batch1_problem, launch, wait_for_bench, wrong_items_count

mod = importlib.import_module("tl_bare")
calls = int(os.environ.get("TL_CALLS", "24"))
replays = int(os.environ.get("TL_REPLAYS", "4"))
p = batch1_problem(calls)
swap = mod.swap_kernel(p.reps, p.committer, p.call.record)
NEVER = np.iinfo(np.int64).max
stamps = device.xp.zeros((calls, 1, 2), dtype=device.xp.int64)


def all_calls():
    for c in range(calls):
        p.kw["top_k_tokens"][...] = p.sel[c]
        launch(p, swap, stamps[c])


all_calls()                      # compiles, and runs every call once eagerly
device.synchronize()
wait_for_bench()
graph = capture_graph(all_calls)
for r in range(replays):
    stamps[:, :, 0] = NEVER
    stamps[:, :, 1] = 0
    device.synchronize()
    graph.replay()
    device.synchronize()
print("wrong items:", wrong_items_count(p), flush=True)
s = device.to_host(stamps)[:, 0, :].astype(np.float64) / 1e3     # us
entry, exit_ = s[:, 0] - s[0, 0], s[:, 1] - s[0, 0]
span = exit_ - entry
gap = entry[1:] - exit_[:-1]
period = entry[1:] - entry[:-1]
for c in range(calls):
    more = f" gap {gap[c]:6.2f} period {period[c]:6.2f}" if c < calls - 1 else ""
    print(f"call {c:2d}: entry {entry[c]:8.2f} span {span[c]:6.2f}{more}")
print(f"mean span {span.mean():.2f} us, mean gap {gap.mean():.2f} us, mean period {period.mean():.2f} us "
      f"(median span {np.median(span):.2f}, gap {np.median(gap):.2f}) over {calls} calls")
