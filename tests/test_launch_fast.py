"""device.launch's cached fast path, device-side value checks, graph capture and the disk cache.

Every test runs in both worlds; on a GPU the fast path is compared with Numba's own launch
(``device.launch_plain``) on the same arguments, and a fresh process must load kernels from disk.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba import value_flags
from hisparse_numba.device import cuda

ON_GPU = device.backend() == "cuda"


@cuda.jit
def axpy_rows_kernel(out, x, rows, scale, offset, words, nwords):
    """out[r, j] = scale * x[rows[r], j] + offset; also words[i] += 1 for i < nwords."""
    r = cuda.blockIdx.x
    j = cuda.threadIdx.x
    if r < rows.shape[0] and j < out.shape[1]:
        out[r, j] = scale * x[rows[r], j] + offset
    if r == 0:
        i = j
        while i < nwords:
            words[i] += 1
            i += cuda.blockDim.x


def _inputs(rng):
    x = rng.standard_normal((6, 40)).astype(np.float32)
    big = np.zeros((5, 48), dtype=np.float32)
    rows = np.array([5, 0, 3, 3, 1], dtype=np.int64)
    host = device.host_cache_array((4, 16), np.uint8)
    return x, big, rows, host


@pytest.mark.parametrize("path", ["launch", "launch_plain"])
def test_launch_paths_match_the_numpy_answer(rng, path):
    x, big, rows, host = _inputs(rng)
    dx, dbig, drows = device.to_device(x), device.to_device(big), device.to_device(rows)
    dev_buf = device.to_device(np.zeros((2, 16), dtype=np.uint8))
    out = dbig[:, :40]                         # a strided view, as launchers pass plan[:, :K]
    fn = getattr(device, path)
    for _ in range(3):                         # repeated calls reuse the cached specialisation
        fn(axpy_rows_kernel, 5, 64, out, dx, drows, np.float32(2.0), 0.5,
           device.byte_words(host), 3)
        fn(axpy_rows_kernel, (5, 1), (64, 1), out, dx, drows, np.float32(2.0), 0.5,
           device.byte_words(dev_buf), 4)
    device.synchronize()
    want = big.copy()
    want[:, :40] = np.float32(2.0) * x[rows] + np.float32(0.5)
    assert np.array_equal(device.to_host(dbig), want)
    assert np.array_equal(device.to_host(device.byte_words(host))[:3], [3, 3, 3])
    assert np.array_equal(device.to_host(device.byte_words(host))[3:], [0] * 5)
    assert np.array_equal(device.to_host(device.byte_words(dev_buf)), [3, 3, 3, 3])
    assert device.fast_launch_failures == []


def test_a_launch_repeated_as_it_was_goes_straight_to_the_driver(rng):
    """On a GPU a launch that repeats the previous argument list passes the argument block packed
    at the first repeat to the driver (device._repeat_launch): float32, float and int scalars, a
    strided view and mapped host words must all arrive as they do through cuda.core's launch."""
    x, big, rows, host = _inputs(rng)
    dx, dbig, drows = device.to_device(x), device.to_device(big), device.to_device(rows)
    out, words = dbig[:, :40], device.byte_words(host)
    for _ in range(4):
        device.launch(axpy_rows_kernel, 5, 64, out, dx, drows, np.float32(2.0), 0.5, words, 3)
    device.synchronize()
    want = big.copy()
    want[:, :40] = np.float32(2.0) * x[rows] + np.float32(0.5)
    assert np.array_equal(device.to_host(dbig), want)
    assert device.to_host(words).tolist() == [4, 4, 4] + [0] * 5
    if ON_GPU:
        assert device._last_launch[axpy_rows_kernel].raw, device.fast_launch_failures
    assert device.fast_launch_failures == []


@cuda.jit
def range_check_kernel(values, lo, hi, flags, verdict):
    i = cuda.grid(1)
    if i < values.shape[0]:
        v = values[i]
        if v < lo:
            value_flags.flag_bad_dev(flags, 0, i)
        if v >= hi:
            value_flags.flag_bad_dev(flags, 1, i)
    value_flags.finish_check_dev(flags, verdict)


def test_check_flags_reports_count_and_first_bad_index_and_resets():
    values = device.to_device(np.array([3, -1, 7, 9, -4, 2, 12], dtype=np.int32))
    got = value_flags.check_flags(range_check_kernel, 1, 32, values, 0, 8)
    assert len(got) == value_flags.CHECK_CONDITIONS
    assert got[0] == (2, 1) and got[1] == (2, 3)
    assert all(g == (0, -1) for g in got[2:])
    clean = device.to_device(np.array([0, 1, 7], dtype=np.int32))
    assert value_flags.check_flags(range_check_kernel, 1, 32, clean, 0, 8) == [(0, -1)] * 8
    # many blocks: the last one to finish writes every block's flags into the verdict
    many = np.arange(-50, 950, dtype=np.int32)
    got = value_flags.check_flags(range_check_kernel, 8, 128, device.to_device(many), 0, 900)
    assert got[0] == (50, 0) and got[1] == (50, 950) and all(g == (0, -1) for g in got[2:])


@cuda.jit
def add_one_kernel(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] += 1


def test_capture_graph_replays_the_recorded_launches():
    a = device.to_device(np.zeros(100, dtype=np.int64))
    device.launch(add_one_kernel, 1, 128, device.to_device(np.zeros(100, dtype=np.int64)))  # compile
    graph = device.capture_graph(lambda: [device.launch(add_one_kernel, 1, 128, a) for _ in range(3)])
    assert graph.eager == (not ON_GPU)
    for _ in range(4):
        graph.replay()
    device.synchronize()
    # eager: fn ran at capture and at each replay; a graph: capture does not execute
    assert np.all(device.to_host(a) == (15 if graph.eager else 12))


def test_kernel_cache_info_names_the_location():
    info = device.kernel_cache_info()
    assert set(info) == {"location", "enabled", "entries", "bytes"}
    assert info["location"] == os.environ["NUMBA_CACHE_DIR"]
    assert info["enabled"] == (ON_GPU and os.environ.get(device.KERNEL_CACHE_ENV, "1") != "0")
    assert len(device.source_digest()) == 64


_CACHE_PROBE = """
import json, numpy as np
from hisparse_numba import device, value_flags
from hisparse_numba.hisparse.single_step.planned_copy import planned_copy_kernel
from hisparse_numba.bench.harness import zero_copy_gather_kernel
host = device.host_cache_array((8, 32), np.uint8)
buf = device.to_device(np.zeros((8, 32), np.uint8))
locs = device.to_device(np.arange(4, dtype=np.int64))
device.launch(zero_copy_gather_kernel, 1, 64, device.byte_words(host), locs,
              device.byte_words(buf), locs, 4)
k = planned_copy_kernel(False)
plan = device.to_device(np.zeros((2, 4), np.int64))
device.launch(k, 1, 64, plan, plan.astype(np.int32), device.to_device(np.zeros(2, np.int32)),
              device.to_device(np.ones(1, np.int32)), device.byte_words(host),
              device.byte_words(buf), 4, value_flags.open_gate())
device.synchronize()
print(json.dumps([sum(f.stats.cache_hits.values()) for f in (zero_copy_gather_kernel, k)]))
"""


@pytest.mark.gpu
def test_a_fresh_process_loads_compiled_kernels_from_disk(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), HISPARSE_NUMBA_BACKEND="cuda")
    runs = [subprocess.run([sys.executable, "-c", _CACHE_PROBE], env=env, capture_output=True,
                           text=True, timeout=600) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    first, second = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert first == [0, 0] and second == [1, 1]


@cuda.jit
def _fill_kernel(a, n, value):
    i = cuda.grid(1)
    if i < n:
        a[i] = value


def test_a_repeated_launch_reuses_its_argument_list_only_for_the_same_arguments():
    """device.launch reuses the previous argument list when the arguments are the same objects and
    equal scalars; a new scalar, a new array or a reshaped array writes a new one."""
    a = device.to_device(np.zeros(8, np.int64))
    b = device.to_device(np.zeros(8, np.int64))
    for value in (3, 3, 5):
        device.launch(_fill_kernel, 1, 32, a, 8, value)
        assert device.to_host(a).tolist() == [value] * 8
    device.launch(_fill_kernel, 1, 32, b, 4, 7)
    assert device.to_host(b).tolist() == [7] * 4 + [0] * 4
    device.launch(_fill_kernel, 1, 32, a, 8, np.int64(9))
    assert device.to_host(a).tolist() == [9] * 8
    # a new array of another dtype, a view with other strides, a reshaped array: each right
    c = device.to_device(np.zeros(8, np.int32))
    device.launch(_fill_kernel, 1, 32, c, 8, 2)
    assert device.to_host(c).tolist() == [2] * 8
    wide = device.to_device(np.zeros(16, np.int64))
    device.launch(_fill_kernel, 1, 32, wide[::2], 8, 4)
    assert device.to_host(wide).tolist() == [4, 0] * 8
    device.launch(_fill_kernel, 1, 32, wide[1::2], 8, 6)
    assert device.to_host(wide).tolist() == [4, 6] * 8
    if device.backend() == "cuda":
        assert device.byte_words(a) is device.byte_words(a)     # one view object per buffer
        last = device._last_launch[_fill_kernel]
        view = wide[1::2]
        device.launch(_fill_kernel, 1, 32, view, 8, 6)    # a new view object: its words rewritten
        patched = device._last_launch[_fill_kernel]
        assert patched is not last and patched.kargs == last.kargs
        device.launch(_fill_kernel, 1, 32, view, 8, 6)    # the same objects: the same list
        assert device._last_launch[_fill_kernel] is patched
        assert device.to_host(wide).tolist() == [4, 6] * 8
