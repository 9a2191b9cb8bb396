"""The device layer: backend choice, the NumPy shim, host pool, byte views."""

import os
import subprocess
import threading
import sys
import time

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.device import cuda


def test_backend_is_a_known_world():
    assert device.backend() in ("cuda", "simulator")
    assert device.xp.__name__ in ("cupy", "numpy")


def test_numpy_row_stack_is_available_for_numba_cuda():
    assert hasattr(np, "row_stack")


def test_round_trip_copies():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    d = device.to_device(a)
    a[0, 0] = 99  # the device copy is independent
    back = device.to_host(d)
    assert isinstance(back, np.ndarray)
    assert back[0, 0] == 0 and np.array_equal(back[1:], a[1:])


@pytest.mark.parametrize("shape,dtype", [((5, 3), np.float32), ((7,), np.uint8), ((2, 1, 8), np.int64)])
def test_host_cache_array_is_zeroed_aligned_and_writable(shape, dtype):
    h = device.host_cache_array(shape, dtype)
    assert h.shape == shape and h.dtype == dtype
    assert device.data_address(h) % 16 == 0
    assert not np.any(np.asarray(h))
    h[...] = 3
    assert np.all(np.asarray(h) == 3)
    assert device.is_mapped(h)


def test_byte_words_views_the_same_bytes():
    h = device.host_cache_array((4, 4), np.float32)
    h[:] = np.arange(16, dtype=np.float32).reshape(4, 4)
    words = device.to_host(device.byte_words(h)) if device.backend() == "cuda" else device.byte_words(h)
    assert np.array_equal(np.asarray(words).view(np.float32).reshape(4, 4), np.asarray(h))


def _backend_in_subprocess(env_value):
    env = dict(os.environ, HISPARSE_NUMBA_BACKEND=env_value)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    out = subprocess.run([sys.executable, "-c", "from hisparse_numba import device; print(device.backend())"],
                         env=env, capture_output=True, text=True)
    return out


def test_simulator_can_be_forced():
    out = _backend_in_subprocess("simulator")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "simulator"


def test_unknown_backend_is_rejected():
    out = _backend_in_subprocess("tpu")
    assert out.returncode != 0
    assert "HISPARSE_NUMBA_BACKEND must be one of" in out.stderr


def test_only_device_imports_numba_cuda():
    import pathlib
    import re

    root = pathlib.Path(device.__file__).parent
    pattern = re.compile(r"^\s*(from numba import cuda|import numba\.cuda|from numba\.cuda)", re.M)
    offenders = [p.relative_to(root) for p in root.rglob("*.py")
                 if p.name != "device.py" and pattern.search(p.read_text())]
    assert offenders == []


@cuda.jit
def _one_thread_raises(out):
    i = cuda.threadIdx.x
    if i == 0:
        out[out.shape[0]] = 1            # out of bounds: the simulator's IndexError
    else:
        total = 0
        for k in range(200_000):         # still running when thread 0 raises
            total += k
        out[i] = total
    cuda.syncthreads()


@pytest.mark.skipif(not device.SIMULATOR, reason="only the simulator raises inside a kernel")
def test_aborted_simulated_launch_writes_nothing_after_its_error():
    out = np.zeros(4, dtype=np.int64)
    for _ in range(3):
        with pytest.raises(IndexError):
            device.launch(_one_thread_raises, 1, 4, out)
        seen = out.copy()
        time.sleep(0.2)
        np.testing.assert_array_equal(out, seen)
        out[...] = 0


def _shared_array_per_thread(shared_class, threads=16):
    """Each of ``threads`` threads asks ``shared_class().array`` for the array of one line at once;
    returns the arrays they got."""
    shared, got = shared_class(0), [None] * threads
    start = threading.Barrier(threads)

    def ask(i):
        start.wait()
        got[i] = shared.array(4, np.int32)

    workers = [threading.Thread(target=ask, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return got


@pytest.mark.skipif(not device.SIMULATOR, reason="the simulator's shared arrays")
def test_threads_that_reach_a_shared_array_together_get_one_array():
    from numba.cuda.simulator import kernelapi

    from hisparse_numba.simulator_threads import lock_shared_allocation

    def slow_allocate(shape, dtype):     # widens the gap between the table lookup and the store
        time.sleep(0.01)
        return np.empty(shape, dtype)

    class Unlocked(kernelapi.FakeCUDAShared):
        def array(self, shape, dtype, alignment=None):   # the simulator's own lookup, slowed
            line = sys._getframe(1).f_code.co_filename, sys._getframe(1).f_lineno
            found = self._allocations.get(line)
            if found is None:
                found = slow_allocate(shape, dtype)
                self._allocations[line] = found
            return found

    assert len({id(a) for a in _shared_array_per_thread(Unlocked)}) > 1   # the race, made certain

    class Locked(Unlocked):
        pass

    lock_shared_allocation(Locked, slow_allocate)
    assert len({id(a) for a in _shared_array_per_thread(Locked)}) == 1
    assert kernelapi.FakeCUDAShared.array.allocation_locked    # device installed the repair
