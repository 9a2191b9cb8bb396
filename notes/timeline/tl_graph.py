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
import importlib, os, time
import numpy as np
from hisparse_numba import device, value_flags
from hisparse_numba.arguments import derived_argument, int64_view
from hisparse_numba.bench.spec import (selections, NUM_STEPS, TOP_K, HOT, PAGE, ITEM_WORDS, SCRATCH,
                                       MISS_ADVANCE, MISS_PER_STEP)
from hisparse_numba.bench.startup import spec_call
from hisparse_numba.graphs import capture_graph
from hisparse_numba.hisparse.spec_examples import make_spec_problem, set_selection, snapshot, wrong_items
from hisparse_numba.hisparse.speculative import check_speculative
from hisparse_numba.hisparse.speculative import launch as L

mod = importlib.import_module("tl_bare")
calls = int(os.environ.get("TL_CALLS", "24"))
replays = int(os.environ.get("TL_REPLAYS", "4"))
batch = 1
xp = device.xp
sel = xp.asarray(selections(batch, calls + 1))
positions = HOT + (calls + 1) * MISS_ADVANCE + 4 * MISS_PER_STEP + 16     # as tl_run.py
kw = make_spec_problem(batch=batch, steps=NUM_STEPS, top_k=TOP_K, hot=HOT, tail=PAGE, item_words=ITEM_WORDS,
                       scratch_capacity=SCRATCH, max_positions=positions, record=True)
set_selection(kw, device.to_host(sel[0]), np.full(batch * NUM_STEPS, positions))
call = check_speculative(**spec_call(kw))
t = call.steps * call.top_k
tile, reps, tiles, committer = L.geometry(call.batch, t)
copiers = L.copier_tiles(call.batch, tiles, committer)
Y = tiles + copiers + committer
print(f"tile {tile} reps {reps} tiles {tiles} copiers {copiers} committer {committer}", flush=True)
swap = mod.swap_kernel(reps, committer, call.record)
work = L.workspace(call.batch, t)
state = call.state
NEVER = np.iinfo(np.int64).max
stamps = xp.zeros((calls, 1, 2), dtype=xp.int64)


def launch(c):
    device.launch(swap, (call.batch, Y), tile, call.top_k_tokens,
                  call.device_buffer_tokens, call.host_cache_locs, call.device_buffer_locs,
                  derived_argument("words", call.host_cache, device.byte_words),
                  derived_argument("words", call.device_buffer, device.byte_words),
                  call.top_k_device_locs, call.req_pool_indices, call.seq_lens,
                  state.cache_index, state.cache_policy, state.scratch_locs,
                  state.scratch_state, derived_argument("int64", state.scratch_state, int64_view),
                  call.num_real_reqs, call.miss_src, call.miss_dst, call.miss_count, *work,
                  call.item_size_bytes // 8, call.tail, call.num_requests, value_flags.open_gate(),
                  stamps[c])


def all_calls():
    for c in range(calls):
        kw["top_k_tokens"][...] = sel[c]
        launch(c)


all_calls()                      # compiles, and runs every call once eagerly
device.synchronize()
flag = os.path.join(os.environ.get("OUT", "."), "bench_done")
for _ in range(600):             # a bench in the same call must finish first
    if os.path.exists(flag):
        break
    time.sleep(1)
graph = capture_graph(all_calls)
for r in range(replays):
    stamps[:, :, 0] = NEVER
    stamps[:, :, 1] = 0
    device.synchronize()
    graph.replay()
    device.synchronize()
bad = wrong_items(snapshot(kw), ITEM_WORDS)
print("wrong items:", len(bad), flush=True)
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
