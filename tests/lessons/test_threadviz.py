"""threadviz records who read and wrote what in the simulator, and draws it."""

import matplotlib
import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.device import cuda
from hisparse_numba.lessons import threadviz

matplotlib.use("Agg")
pytestmark = pytest.mark.skipif(not device.SIMULATOR, reason="recording needs the simulator")


@cuda.jit
def shift_right(src, dst):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    dst[i + 1] = src[i]                      # no guard: the last thread writes past the end


@cuda.jit
def fill_2d(out):
    out[cuda.blockIdx.x, cuda.threadIdx.x] = cuda.blockIdx.x * 10 + cuda.threadIdx.x


def test_records_threads_reads_writes_and_out_of_bounds():
    src, dst = np.arange(8, dtype=np.int64), np.zeros(8, np.int64)
    trace = threadviz.record(shift_right, 2, 4, src, dst, names=["src", "dst"])
    assert dst.tolist() == [0, 0, 1, 2, 3, 4, 5, 6]            # writes land in place; the bad one does not
    reads = {(a.block[0], a.thread[0]): a.index for a in trace.of("src", "read")}
    assert reads == {(b, t): 4 * b + t for b in range(2) for t in range(4)}
    (oob,) = trace.out_of_bounds()
    assert (oob.buffer, oob.kind, oob.block[0], oob.thread[0], oob.index) == ("dst", "write", 1, 3, 8)
    assert all(len(w) == 1 for w in trace.writers("dst").values())
    assert threadviz.chunk_of(trace, trace.of("dst", "write")[0]) == trace.of("dst", "write")[0].index // 2


def test_two_dimensional_buffers_and_warps():
    out = np.zeros((2, 40), np.int64)
    trace = threadviz.record(fill_2d, 2, 40, out, names=["out"])
    assert out[1, 39] == 49
    warps = {a.thread[0]: a.warp for a in trace.of("out", "write")}
    assert warps[31] == 0 and warps[32] == 1
    assert sorted(a.index for a in trace.of("out", "write")) == list(range(80))


def test_draw_returns_a_figure_with_a_panel_per_kind():
    src, dst = np.arange(8, dtype=np.int64), np.zeros(8, np.int64)
    trace = threadviz.record(shift_right, 2, 4, src, dst, names=["src", "dst"])
    fig = threadviz.draw(trace, cols=4, highlight=[("dst", 1)], expected={"dst": dst != 0})
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert any("src" in t and "reads" in t for t in titles)
    assert any("dst" in t and "past the end" in t for t in titles)
    assert any("reference changes" in t for t in titles)
    assert threadviz.draw(None) is None


@cuda.jit
def stage_through_shared(src, dst):
    t = cuda.threadIdx.x
    tile = cuda.shared.array(8, np.int64)
    tile[t] = src[t]
    cuda.syncthreads()
    dst[t] = tile[7 - t]


def test_shared_arrays_lines_and_barrier_intervals_are_recorded():
    src, dst = np.arange(8, dtype=np.int64), np.zeros(8, np.int64)
    trace = threadviz.record(stage_through_shared, 1, 8, src, dst)
    assert list(trace.arrays) == ["src", "dst", "tile"] and list(trace.shared) == ["tile"]   # parameter names
    assert dst.tolist() == src[::-1].tolist()
    assert {a.interval for a in trace.of("tile", "write")} == {0} and {a.interval for a in trace.of("tile", "read")} == {1}
    assert {a.where.text for a in trace.of("tile", "read")} == {"dst[t] = tile[7 - t]"}
    (round_,) = trace.barriers
    ((kind, where, via), threads), = round_.arrived.items()
    assert kind == "syncthreads" and via is None and where.text == "cuda.syncthreads()" and len(threads) == round_.total == 8


def test_show_draws_one_row_per_buffer_and_barrier_interval():
    import matplotlib.pyplot as plt

    plt.close("all")
    src, dst = np.arange(8, dtype=np.int64), np.zeros(8, np.int64)
    trace = threadviz.show(stage_through_shared, 1, 8, src, dst)
    assert trace.of("tile", "write") and dst[0] == 7
    titles = [ax.get_title() for ax in plt.gcf().axes if ax.get_title()]
    assert any(t.startswith("tile shared [8] int64: writes") and "interval 0" in t for t in titles)
    assert any(t.startswith("tile shared [8] int64: reads") and "after barrier 1" in t for t in titles)
    plt.close("all")

