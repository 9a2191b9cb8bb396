"""Timeline of the speculative kernel at bench spec's batch-1 problem (developer tooling).

Runs ``tl_kernel.py`` (``make_tl.py`` writes it: the working tree's kernel with ``%globaltimer``
stamps) on ``TL_CALLS`` selections (default 24), ``TL_CYCLES`` times over (default 1); from the
first launch on, it waits for ``$OUT/bench_done`` (a bench in the same call must finish first).
Prints per-block stamps in us from the first block's entry (medians over the calls after the
fourth), for the copier tiles min/median/p90/max, then each call's committer stages and last
stamp: the calls whose hash inserts leave entries to the serial cuckoo are the slow ones, and
medians hide them."""
import importlib, os
import numpy as np
from hisparse_numba import device
from tl_problem import batch1_problem, launch, wait_for_bench, wrong_items_count

mod = importlib.import_module("tl_kernel")
calls = int(os.environ.get("TL_CALLS", "24"))
cycles = int(os.environ.get("TL_CYCLES", "1"))
p = batch1_problem(calls)
tiles, copiers, committer, Y = p.tiles, p.copiers, p.committer, p.Y
swap = mod.swap_kernel(p.reps, committer, p.call.record)
stamps = device.xp.zeros((Y, 16), dtype=device.xp.int64)
rows = []
for c in range(calls * cycles):
    if c == 1:   # compiled and ran once: wait for the bench to finish before timing
        wait_for_bench()
    p.kw["top_k_tokens"][...] = p.sel[c % calls]
    stamps[...] = 0
    launch(p, swap, stamps)
    device.synchronize()
    rows.append(device.to_host(stamps).astype(np.int64))
print("wrong items:", wrong_items_count(p), flush=True)
a = np.stack(rows[4:]).astype(np.float64)          # [calls, Y, 16]
t0 = np.where(a[:, :, 0] > 0, a[:, :, 0], np.inf).min(axis=1)
rel = np.where(a > 0, (a - t0[:, None, None]) / 1e3, np.nan)
med = np.nanmedian(rel, axis=0)
names = {"tile": ["entry", "classified", "claims seen", "counted+base", "numbered", "arrived", "copied"],
         "committer": ["entry", "counted seen", "victim count", "union victims", "evictions",
                       "arrivals seen", "-", "slots+promotion", "hash", "end"],
         "copier": ["entry", "claimed seen", "numbered seen (w0)", "w0 arrived", "held stored (max)", "extras end (max)"]}
for y in range(tiles):
    print(f"tile {y}: " + ", ".join(f"{n} {med[y, k]:.1f}" for k, n in enumerate(names['tile'])))
if committer:
    order = sorted(range(len(names["committer"])), key=lambda k: np.nan_to_num(med[Y - 1, k], nan=np.inf))
    print("committer: " + ", ".join(f"{names['committer'][k]} {med[Y-1, k]:.1f}" for k in order
                                    if not np.isnan(med[Y - 1, k])))   # in time order
if copiers:
    cp = med[tiles:tiles + copiers]
    for k, n in enumerate(names["copier"]):
        col = cp[:, k]
        col = col[~np.isnan(col)]
        if len(col):
            print(f"copiers {n}: min {col.min():.1f} median {np.median(col):.1f} p90 {np.percentile(col, 90):.1f} max {col.max():.1f} (n={len(col)})")

# per call (not medians): the committer's slots+promotion, hash and end, and the last stamp of any block
Yc = Y - 1
for c in range(a.shape[0]):
    last = np.nanmax(rel[c])
    print(f"call {c + 4}: promotion {rel[c, Yc, 7]:.1f} hash {rel[c, Yc, 8]:.1f} end {rel[c, Yc, 9]:.1f} last stamp {last:.1f}")
