"""Lesson 00's checkers: right for the right answer, wrong (naming the mistake) for plausible wrong ones."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.lessons import common, ex00

I64 = np.int64


def _out(capsys):
    return capsys.readouterr().out


def test_lesson_pools_match_the_first_gather():
    host, buf = ex00.lesson_pools()
    assert buf[[4, 0, 5, 2], 0].tolist() == [17, 3, 9, 22] and buf[1, 0] == -1 and buf[3, 0] == -1


@pytest.mark.parametrize("src,dst,expected,words", [
    ([5], [1], True, "right"),
    ([5, 3], [1, 0], False, "already resident"),          # re-copies a resident token
    ([5], [0], False, "row 0 held token 3"),              # overwrites the token this step reads
    ([1], [5], False, "token 5 must land"),               # src and dst swapped
    ([5], [3], False, "token 5 must land"),               # the other free row: not the one asked for
])
def test_next_copy(capsys, src, dst, expected, words):
    assert ex00.check_next_copy(lambda: (np.array(src, I64), np.array(dst, I64))) is expected
    out = _out(capsys)
    assert out.startswith("right" if expected else "wrong") and words in out, out


def test_next_copy_dtype_and_shape(capsys):
    assert not ex00.check_next_copy(lambda: (np.array([5], np.int32), np.array([1], np.int32)))
    assert "int64" in _out(capsys)
    assert not ex00.check_next_copy(lambda: 5)
    assert "(src, dst)" in _out(capsys)


def test_next_copy_judges_a_fresh_copy_after_a_wrong_attempt(capsys):
    # A wrong attempt on the notebook's buffer must not make the right answer look wrong.
    host, buf = ex00.lesson_pools()
    ex00.gather_to_hot_buffer_reference(host_cache=host, device_buffer=buf, src_locs=np.array([5], I64),
                                        dst_locs=np.array([0], I64), item_size_bytes=ex00.ITEM_SIZE_BYTES)
    assert not ex00.check_next_copy(lambda: (np.array([5], I64), np.array([0], I64)))
    assert ex00.check_next_copy(lambda: (np.array([5], I64), np.array([1], I64)))
    assert _out(capsys).splitlines()[-1].startswith("right")


def test_learner_exceptions_are_theirs(capsys):
    def stub():
        raise NotImplementedError("hint")
    assert not ex00.check_next_copy(stub)
    assert _out(capsys).startswith("not yet: hint")

    def broken():
        return np.array([5], I64) + "x"
    assert not ex00.check_next_copy(broken)
    out = _out(capsys)
    assert out.startswith("wrong: your code raised") and "line" in out and "launcher" not in out, out


@pytest.mark.parametrize("fn,expected", [
    (lambda b, t: (b * 8 + t // 32, t % 32), True),
    (lambda b, t: (t // 32, t % 32), False),             # forgets the block
    (lambda b, t: (b * 256 + t, 0), False),              # one pair per thread
    (lambda b, t: (b * 8 + t // 32, t), False),          # chunk = thread index
])
def test_pair_and_chunk(capsys, fn, expected):
    assert ex00.check_pair_and_chunk(fn) is expected
    assert _out(capsys).startswith("right" if expected else "wrong")


@pytest.mark.skipif(not device.SIMULATOR, reason="recording needs the simulator")
def test_recorded_gather_writes_each_chunk_once():
    trace = ex00.record_first_gather()
    writers = trace.writers("device_words")
    assert sorted(writers) == sorted(w for r in ex00.FIRST_DST for w in range(4 * r, 4 * r + 4))
    assert all(len(v) == 1 for v in writers.values()) and not trace.out_of_bounds()


def _step5():
    from hisparse_numba.hisparse.single_step.examples import copy_problem  # noqa: F401
    H, K, S = 6, 3, 20
    return dict(
        top_k_tokens=np.array([[4, 12, 13]], np.int32),
        device_buffer_tokens=np.array([[7, 1, 2, 9, 0, 8, -1]], np.int32),
        device_buffer_locs=np.array([[5, 2, 7, 0, 3, 6, 1]], np.int32),
        lru_slots=np.array([[3, 4, 0, 5, 2, 1]], np.int16),
        host_cache_locs=np.where(np.arange(S) == 13, -1, np.arange(S))[None].astype(np.int64),
        host_cache=np.zeros((S, 8), np.float32), device_buffer=np.zeros((8, 8), np.float32),
        top_k_device_locs=np.full((1, K), -1, np.int32), req_pool_indices=np.array([0], np.int32),
        seq_lens=np.array([14], np.int32), item_size_bytes=32, num_top_k=K, hot_buffer_size=H,
        block_size=32, num_real_reqs=np.array([1], np.int32), miss_src=np.full((1, K), -1, np.int64),
        miss_dst=np.full((1, K), -1, np.int32), miss_count=np.zeros(1, np.int32))


def test_misses(capsys):
    p = _step5()
    slots, lru = common.miss_slots_and_lru(p)
    assert ex00.check_misses(p, lambda: (slots, lru))
    assert not ex00.check_misses(p, lambda: (slots[::-1] if len(slots) > 1 else [5], lru))
    assert not ex00.check_misses(p, lambda: (slots, sorted(lru)))
    assert not ex00.check_misses(p, lambda: (slots, lru[::-1]))
    out = _out(capsys).splitlines()
    assert out[0].startswith("right") and all(l.startswith("wrong") for l in out[1:]), out
