"""How many hash-insert leftovers (entries that neither bank's round placed) and cuckoo kicks each
call of `bench spec`'s batch-1 sequence has, from the NumPy reference (simulator world, about a
minute): ``HISPARSE_NUMBA_BACKEND=simulator python notes/timeline/leftovers.py``.

The speculative kernel runs the leftovers' cuckoo on one thread (about 0.2-0.5 us a kick on the
H200), so these calls are a cycle's slow ones; a timeline that prints medians does not show them
(``tl_run.py`` prints every call as well). Sequences: the timeline's (24 selections, 3 cycles) and
the bench's (28 selections, 6 cycles). It also says which calls the parallel chains tried in
session 19 would have run in parallel (no bucket read by two chains)."""
import numpy as np

from hisparse_numba.bench.spec import (HOT, ITEM_WORDS, MISS_ADVANCE, MISS_PER_STEP, NUM_STEPS, PAGE,
                                       SCRATCH, TOP_K, selections)
from hisparse_numba.hisparse.speculative import hash as spec_hash
from hisparse_numba.hisparse.speculative.examples import host_copy, make_spec_problem, set_selection
import hisparse_numba.hisparse.speculative.reference as R

calls_seen = []          # per call: (leftovers, kicks, the parallel chains' longest or -1)


def counting_insert(bank0, bank1, entries):
    """hash_insert_reference, counting the leftovers of the rounds and the cuckoo's kicks."""
    mask = bank0.shape[0] - 1
    pending = list(entries)
    for bank, hfun in ((bank0, spec_hash.h0), (bank1, spec_hash.h1)):
        best = {}
        for e in pending:
            b = hfun(e & spec_hash.MASK32, mask)
            if bank[b] < 0:
                best[b] = max(best.get(b, -1), e)
        for b, e in best.items():
            bank[b] = e
        pending = [e for e in pending if bank[hfun(e & spec_hash.MASK32, mask)] != e]
    parallel = parallel_chains(bank0, bank1, pending, mask)
    kicks, degraded = 0, False
    for e in pending:
        for kick in range(spec_hash.MAX_KICKS):
            kicks += 1
            tok = e & spec_hash.MASK32
            b0, b1 = spec_hash.h0(tok, mask), spec_hash.h1(tok, mask)
            if bank0[b0] < 0:
                bank0[b0] = e
                break
            if bank1[b1] < 0:
                bank1[b1] = e
                break
            if kick % 2 == 0:
                e, bank0[b0] = int(bank0[b0]), e
            else:
                e, bank1[b1] = int(bank1[b1]), e
        else:
            degraded = True
    calls_seen.append((len(pending), kicks, parallel))
    return degraded


def parallel_chains(bank0, bank1, pending, mask):
    """What the parallel chains (``chains_dev`` in parallel-cuckoo.patch) would do with these
    leftovers: the longest chain's kicks when no two chains read a common bucket, else -1 (thread
    0 takes over)."""
    owner, longest = {}, 0
    for j, e in enumerate(pending):
        own = {}
        for kick in range(spec_hash.MAX_KICKS):
            tok = e & spec_hash.MASK32
            k0, k1 = (0, spec_hash.h0(tok, mask)), (1, spec_hash.h1(tok, mask))
            c0 = own.get(k0, int(bank0[k0[1]]))
            c1 = own.get(k1, int(bank1[k1[1]]))
            for key in (k0,) if c0 < 0 else (k0, k1):
                if owner.setdefault(key, j) != j:
                    return -1
            if c0 < 0 or c1 < 0:
                break
            own[k0 if kick % 2 == 0 else k1] = e
            e = c0 if kick % 2 == 0 else c1
        longest = max(longest, kick + 1)
    return longest


R.hash_insert_reference = counting_insert
for calls, cycles, spare in ((24, 3, 1), (28, 6, 0)):
    sel = selections(1, calls + spare)
    positions = HOT + (calls + spare) * MISS_ADVANCE + 4 * MISS_PER_STEP + 16
    kw = make_spec_problem(batch=1, steps=NUM_STEPS, top_k=TOP_K, hot=HOT, tail=PAGE,
                           item_words=ITEM_WORDS, scratch_capacity=SCRATCH,
                           max_positions=positions, record=True)
    set_selection(kw, sel[0], np.full(NUM_STEPS, positions))
    ref = host_copy(kw)
    calls_seen.clear()
    for k in range(cycles * calls):
        ref["top_k_tokens"][...] = sel[k % calls]
        R.load_cache_to_device_buffer_spec_mla_reference(**ref)
    left, kicks, parallel = np.array(calls_seen).T
    print(f"{calls} selections: kicks per call {kicks.tolist()}")
    print(f"  parallel chains (longest chain's kicks, -1: a common bucket) {parallel.tolist()}")
    for c in range(cycles):
        part = slice(c * calls, (c + 1) * calls)
        took = left[part] > 0
        ok = took & (parallel[part] >= 0)
        print(f"  cycle {c}: mean leftovers {left[part].mean():.2f}, mean kicks {kicks[part].mean():.2f};"
              f" calls with leftovers {took.sum()}, run in parallel {ok.sum()} (their kicks"
              f" {kicks[part][ok].sum()} serial, {parallel[part][ok].sum()} parallel)")
