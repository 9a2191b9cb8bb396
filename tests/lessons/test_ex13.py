"""The exercise checker of lesson 13 (and the lesson's helpers): right for right, wrong for wrong."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.kv_canary import FailReason
from hisparse_numba.lessons import common, ex13
from tests.lessons.verdicts import assert_verdict

KV = int(FailReason.VERIFY_REAL_KV_HASH_MISMATCH)


def right(ring, index):
    rows = ring[:min(int(index[0]), ring.shape[0])]
    return sorted({int(s) - 1 for s in rows[(rows[:, 7] & KV) != 0][:, 1]})


def ignores_index(ring, index):
    return sorted({int(s) - 1 for s in ring[(ring[:, 7] & KV) != 0][:, 1]})


def any_bit(ring, index):
    rows = ring[:int(index[0])]
    return sorted({int(s) - 1 for s in rows[rows[:, 7] != 0][:, 1]})


def slots_not_rows(ring, index):
    rows = ring[:int(index[0])]
    return sorted({int(s) for s in rows[(rows[:, 7] & KV) != 0][:, 1]})


def equality_not_mask(ring, index):  # misses rows with REAL_KV combined with another bit
    rows = ring[:int(index[0])]
    return sorted({int(s) - 1 for s in rows[rows[:, 7] == KV][:, 1]})


def with_duplicates(ring, index):
    rows = ring[:int(index[0])]
    return sorted(int(s) - 1 for s in rows[(rows[:, 7] & KV) != 0][:, 1])


def crashes(ring, index):
    return ring[:, 8]


def stub(ring, index):
    raise NotImplementedError("rows below the write index with the REAL_KV bit (about 3 lines)")


@pytest.mark.parametrize("fn,word,names", [
    (right, "right", ()), (ignores_index, "wrong", ("leftovers",)), (any_bit, "wrong", ("only the VERIFY_REAL_KV",)),
    (slots_not_rows, "wrong", ("device row = slot - 1",)), (equality_not_mask, "wrong", ("test the bit with &",)),
    (with_duplicates, "wrong", ("appears twice",)), (crashes, "wrong", ("your code raised IndexError",)),
    (stub, "not yet", ("about 3 lines",))])
def test_ex13_check_corrupted_rows(capsys, fn, word, names):
    assert_verdict(capsys, ex13.check_corrupted_rows(fn), word, *names)


def test_ex13_checker_leaves_no_trace_of_the_ring_to_the_next_case(capsys):
    seen = []

    def mutating(ring, index):
        seen.append(int(index[0]))
        answer = right(ring, index)
        ring[...] = 0            # a learner's function may scribble on its input
        index[0] = 0
        return answer

    assert_verdict(capsys, ex13.check_corrupted_rows(mutating), "right")
    assert len(seen) == len(ex13.EXERCISE_CASES)


def test_sglang_view_overlaps_rows():
    arena = device.xp.arange(16, dtype=device.xp.int64)
    view = common.sglang_view(arena, 3, 8, 4)
    host = device.to_host(view)
    assert host.shape == (3, 8)
    assert host[0, 4:].tolist() == host[1, :4].tolist()
    with pytest.raises(ValueError):
        common.sglang_view(arena[:15], 3, 8, 4)


def test_decode_ring_reads_only_below_the_index():
    ring, index = ex13._ring([(41, 20, KV)], stale=[(7, 1, KV)])
    lines = ex13.decode_ring(ring, index, locate=lambda s: f"owner of {s}")
    assert len(lines) == 1
    assert "slot 41 (owner of 41)" in lines[0] and "VERIFY_REAL_KV_HASH_MISMATCH" in lines[0]


def test_capstone_problem_overflows_half_a_plan():
    want, _ = ex13.reference_step(ex13.capstone_problem(), *ex13.skip_layer(ex13.capstone_problem()))
    counts = want["miss_count"]
    k = want["num_top_k"]
    assert counts[0] > k // 2 and counts[1] >= 1          # rows 0 and 1 overlap in a [B, K/2] plan
    watched = {slot for req in ex13.watch_list(want) for slot, _, _ in req}
    assert 0 not in watched and len(watched) == sum(len(r) for r in ex13.watch_list(want))
    np.testing.assert_array_equal(counts, [7, 7, 0])
