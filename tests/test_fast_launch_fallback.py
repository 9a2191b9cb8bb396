"""fast_launch: the fast path and its fallback to Numba's public launch.

The fallback tests run in both worlds: a :class:`FastLauncher` is built on stand-ins for
``numba.cuda``, ``cuda.core``, CuPy arrays and a compiled kernel, with one private piece taken away
or changed, and must then launch every call through the plain launch with exactly one
``FastLaunchFallback`` warning. On a GPU the real fast path and the forced fallback launch the same
kernel on the same inputs and every output buffer must match.
"""

import subprocess
import sys
import types
import warnings

import numpy as np
import pytest

from hisparse_numba import device, fast_launch
from hisparse_numba.device import cuda

ON_GPU = device.backend() == "cuda"


# ----------------------------------------------------------------------------- stand-ins
class FakeArray:
    """What the fast path reads of a CuPy array."""

    def __init__(self, ptr, shape):
        self.data = types.SimpleNamespace(ptr=ptr)
        self.shape, self.strides = shape, tuple(8 for _ in shape)
        self.size, self.itemsize, self.ndim = int(np.prod(shape)), 8, len(shape)
        self.dtype = np.dtype(np.int64)
        self.flags = types.SimpleNamespace(c_contiguous=True, f_contiguous=len(shape) == 1)


class FakeWords:
    pass


def _prepare_args(self, ty, val, stream, retr, kernelargs):
    kernelargs.append(int(val))


def fake_cuda(**drop):
    """A stand-in ``numba.cuda`` with the pieces ``find_internals`` reads (``drop`` removes some)."""
    ns = types.SimpleNamespace(
        typing=types.SimpleNamespace(typeof=types.SimpleNamespace(
            typeof=lambda a, purpose: type(a).__name__,
            Purpose=types.SimpleNamespace(argument="argument"))),
        errors=types.SimpleNamespace(normalize_kernel_dimensions=lambda g, b: ((g, 1, 1), (b, 1, 1))),
        _compat=types.SimpleNamespace(CUDA_CORE_GE_1_0=True),
        dispatcher=types.SimpleNamespace(_Kernel=type("_Kernel", (), {"_prepare_args": _prepare_args})))
    for name in drop:
        delattr(ns, name)
    return ns


class FakeCore:
    """A stand-in ``cuda.core`` that records its launches."""

    def __init__(self, refuse=False):
        self.launches, self.refuse = [], refuse
        self.LaunchConfig = lambda **kw: kw
        self.Stream = types.SimpleNamespace(from_handle=lambda ptr: ("stream", ptr))

    def launch(self, stream, config, cufunc, *kargs):
        if self.refuse:
            raise RuntimeError("launch refused")
        self.launches.append(list(kargs))


class FakeKernel:
    """A stand-in dispatcher whose ``compile`` gives a compiled kernel (``shape`` changes it)."""

    def __init__(self, shape="complete"):
        self.shape = shape
        self.py_func = self.compile
        self.targetoptions, self.specialized = {}, False

    def compile(self, argtypes):
        compiled = types.SimpleNamespace(argument_types=argtypes, debug=False, cooperative=False,
                                         _prepare_args=lambda *a: _prepare_args(None, *a))
        if self.shape != "no codelibrary":
            compiled._codelibrary = types.SimpleNamespace(
                get_cufunc=lambda: types.SimpleNamespace(kernel=types.SimpleNamespace(handle=11)))
        return compiled


class FakeDriver:
    """A stand-in for cuda.core's argument packer and the driver's cuLaunchKernel."""

    def __init__(self):
        self.launches = []

    def pieces(self):
        holder = lambda kargs: types.SimpleNamespace(ptr=("packed", tuple(kargs)))  # noqa: E731
        return holder, lambda func, *dims_and_params: self.launches.append(dims_and_params) or (0,), 0


def make_launcher(cuda_module, core, driver=None):
    plain = []
    launcher = fast_launch.FastLauncher(
        cuda_module, array_type=FakeArray, words_type=FakeWords, current_stream=lambda: 7,
        plain_launch=lambda kernel, grid, block, *args: plain.append(args),
        numba_arg=lambda a: a, use_disk_cache=lambda kernel: None, core=core,
        driver_launch=driver.pieces if driver else lambda: None)
    return launcher, plain


@pytest.fixture
def fresh_warning_state(monkeypatch):
    """A process that has not warned yet, with its own failure list."""
    monkeypatch.setattr(fast_launch, "_warned", False)
    monkeypatch.setattr(fast_launch, "failures", [])


def _launch_three_times(launcher):
    array = FakeArray(4096, (5,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for value in (3, 3, 4):
            launcher.launch(launcher.kernel, 2, 32, (array, value))
    return [w for w in caught if issubclass(w.category, fast_launch.FastLaunchFallback)]


# ------------------------------------------------------------------ both worlds: fakes
def test_with_every_internal_present_the_fast_path_writes_the_argument_list(fresh_warning_state):
    core, driver = FakeCore(), FakeDriver()
    launcher, plain = make_launcher(fake_cuda(), core, driver)
    launcher.kernel = FakeKernel()
    assert _launch_three_times(launcher) == [] and plain == []
    # an array's words (meminfo, parent, size, itemsize, pointer, shape, strides), then the scalar
    # through Numba's marshalling; the repeat goes to the driver with the list packed once, and the
    # 4 patches the scalar's word
    first = [0, 0, 5, 8, 4096, 5, 8, 3]
    assert core.launches == [first, first[:-1] + [4]]
    assert driver.launches == [(2, 1, 1, 32, 1, 1, 0, 7, ("packed", tuple(first)), 0)]
    assert fast_launch.failures == []


def test_without_the_driver_launch_repeats_go_through_cuda_core_with_one_warning(fresh_warning_state):
    core = FakeCore()
    launcher, plain = make_launcher(fake_cuda(), core)
    launcher.kernel = FakeKernel()
    caught = _launch_three_times(launcher)
    assert len(caught) == 1 and "ParamHolder" in str(caught[0].message)
    assert len(core.launches) == 3 and plain == []


@pytest.mark.parametrize("missing", ["errors", "typing", "_compat", "dispatcher"])
def test_a_missing_numba_internal_falls_back_with_one_warning(fresh_warning_state, missing):
    core = FakeCore()
    launcher, plain = make_launcher(fake_cuda(**{missing: True}), core)
    launcher.kernel = FakeKernel()
    caught = _launch_three_times(launcher)
    assert len(caught) == 1 and "numba.cuda lacks" in str(caught[0].message)
    assert core.launches == [] and [a[1] for a in plain] == [3, 3, 4]
    # a second launcher in the same process falls back silently
    again, plain_again = make_launcher(fake_cuda(**{missing: True}), FakeCore())
    again.kernel = FakeKernel()
    assert _launch_three_times(again) == [] and len(plain_again) == 3


def test_a_changed_prepare_args_signature_falls_back(fresh_warning_state):
    changed = fake_cuda()
    changed.dispatcher._Kernel._prepare_args = lambda self, ty, val, stream, kernelargs: None
    launcher, plain = make_launcher(changed, FakeCore())
    launcher.kernel = FakeKernel()
    caught = _launch_three_times(launcher)
    assert len(caught) == 1 and "_prepare_args takes" in str(caught[0].message) and len(plain) == 3


def test_missing_cuda_core_falls_back(fresh_warning_state):
    launcher, plain = make_launcher(fake_cuda(), types.SimpleNamespace(launch=None))
    launcher.kernel = FakeKernel()
    caught = _launch_three_times(launcher)
    assert len(caught) == 1 and "cuda.core lacks" in str(caught[0].message) and len(plain) == 3


def test_a_compiled_kernel_of_another_shape_falls_back(fresh_warning_state):
    core = FakeCore()
    launcher, plain = make_launcher(fake_cuda(), core)
    launcher.kernel = FakeKernel("no codelibrary")
    caught = _launch_three_times(launcher)
    assert len(caught) == 1 and "changed shape" in str(caught[0].message)
    assert core.launches == [] and len(plain) == 3


def test_a_refused_first_launch_falls_back_for_that_kernel(fresh_warning_state):
    launcher, plain = make_launcher(fake_cuda(), FakeCore(refuse=True))
    launcher.kernel = FakeKernel()
    caught = _launch_three_times(launcher)
    assert len(caught) == 1 and "launch refused" in str(caught[0].message) and len(plain) == 3
    assert launcher.last_launch == {}


def test_the_installed_numba_has_what_the_fast_path_needs():
    """Outside the simulator (a fresh process with the real numba.cuda and cuda.core), every
    private piece is where the fast path looks for it; no GPU is needed to look."""
    probe = ("import os; os.environ.pop('NUMBA_ENABLE_CUDASIM', None)\n"
             "import numba.cuda as cuda\n"
             "from hisparse_numba import fast_launch\n"
             "found = fast_launch.find_internals(cuda)\n"
             "print(found if isinstance(found, str) else 'complete')\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "complete"


# --------------------------------------------------------------------- GPU: both paths
@cuda.jit
def _scale_rows_kernel(out, counts, x, rows, scale, words):
    r = cuda.blockIdx.x
    j = cuda.threadIdx.x
    if r < rows.shape[0] and j < out.shape[1]:
        out[r, j] = scale * x[rows[r], j]
        cuda.atomic.add(counts, r % counts.shape[0], 1)
    if r == 0 and j < words.shape[0]:
        words[j] += 1


def _run_kernel_three_times(launch, rng_seed):
    rng = np.random.default_rng(rng_seed)
    x = device.to_device(rng.standard_normal((6, 40)).astype(np.float32))
    big = device.to_device(np.zeros((5, 48), dtype=np.float32))
    counts = device.to_device(np.zeros(3, dtype=np.int64))
    rows = device.to_device(np.array([5, 0, 3, 3, 1], dtype=np.int64))
    host = device.host_cache_array((4, 16), np.uint8)
    for scale in (np.float32(2.0), np.float32(2.0), np.float32(-1.5)):
        launch(_scale_rows_kernel, 5, 64, big[:, :40], counts, x, rows, scale, device.byte_words(host))
    device.synchronize()
    return {"out": device.to_host(big), "counts": device.to_host(counts),
            "words": device.to_host(device.byte_words(host))}


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="the fast path runs only on a GPU")
def test_fast_path_and_forced_fallback_write_the_same_buffers(monkeypatch):
    fast = _run_kernel_three_times(device.launch, 0)
    assert device.fast_launch_failures == []
    monkeypatch.setattr(fast_launch, "_warned", False)
    monkeypatch.setattr(fast_launch, "failures", [])
    fallback = fast_launch.FastLauncher(
        fake_cuda(errors=True), array_type=device.xp.ndarray, words_type=device.DeviceWords,
        current_stream=device.current_stream, plain_launch=device.launch_plain,
        numba_arg=device._numba_arg, use_disk_cache=device.use_disk_cache)
    with pytest.warns(fast_launch.FastLaunchFallback):
        slow = _run_kernel_three_times(lambda k, g, b, *a: fallback.launch(k, g, b, a), 0)
    assert fallback.internals is False and fallback.last_launch == {}
    assert set(fast) == set(slow)
    for name in fast:
        assert np.array_equal(fast[name], slow[name]), name
