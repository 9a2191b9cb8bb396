"""Test configuration shared by both worlds.

The same tests run under Numba's CUDA simulator on a CPU-only machine and on a real GPU.
``BIG`` (or ``sized(small, big)``) picks small problems for the simulator and sglang's sizes on a
GPU; ``@pytest.mark.gpu`` marks tests that only make sense on real hardware (sanitizer-sized runs,
mapped memory).

``@pytest.mark.slow`` marks a test that takes more than about 10 s in the world it runs in (the
simulator at small sizes, or a GPU at sglang's sizes, where the NumPy reference usually dominates),
so that ``pytest -m "not slow"`` is a quick subset in both worlds; ``slow_on_gpu`` is the same
marker applied only when ``BIG`` (``@slow_on_gpu`` on a test that is quick in the simulator).
Kernels compiled by the tests go to the on-disk kernel cache (the report header says where);
``hisparse-numba warmup --tests`` fills it beforehand.
"""

import os
import re

import numpy as np
import pytest

from hisparse_numba import device

from . import progress

ON_GPU = device.backend() == "cuda"
# sglang's sizes on a GPU; HISPARSE_NUMBA_TEST_SIZES=small keeps simulator sizes there too
# (used under compute-sanitizer, which slows kernels down a hundredfold).
BIG = ON_GPU and os.environ.get("HISPARSE_NUMBA_TEST_SIZES", "") != "small"


def slow_on_gpu(test=None, *, seconds: float = 10):
    """``@pytest.mark.slow`` at sglang's sizes only (a test that is quick in the simulator);
    ``@slow_on_gpu(seconds=...)`` says about how long it takes there (see ``slow_seconds``)."""
    def mark(t):
        return pytest.mark.slow(seconds=seconds)(t) if BIG else t
    return mark if test is None else mark(test)


def slow_seconds(item) -> float:
    """About how long a slow test takes (its ``@pytest.mark.slow(seconds=...)``, else 10); 0 for the others."""
    marker = item.get_closest_marker("slow")
    return 0.0 if marker is None else float(marker.kwargs.get("seconds", 10))


def pytest_configure(config):
    progress.register(config)  # one line a phase while the suite starts (tests/progress.py)
    # pytest-xdist hands each process two tests at a time instead of a quarter of its share at
    # once, so that the long tests sorted first (``longest_first``) start at once on different
    # processes
    if getattr(config.option, "maxschedchunk", "absent") is None:
        config.option.maxschedchunk = 1


def skip_when_the_index_is_unreachable(pip) -> None:
    """Skip a test whose ``pip`` run (a CompletedProcess) failed for want of the package index (a
    GPU machine with no network), not because of the project."""
    if pip.returncode and re.search(r"connection|resolve|No matching distribution|network", pip.stderr, re.I):
        pytest.skip(f"package index unreachable: {pip.stderr.strip().splitlines()[-1]}")


def sized(small, big):
    """``big`` (sglang's sizes) on a GPU, ``small`` in the simulator and under the sanitizer."""
    return big if BIG else small


def pytest_report_header(config):
    header = f"hisparse-numba backend: {device.backend()}"
    if ON_GPU:
        info = device.kernel_cache_info()
        header += (f"; kernel cache {info['location']} ({info['entries']} entries"
                   f"{'' if info['enabled'] else ', disabled'}); sizes: {'sglang' if BIG else 'small'}")
    return header


def longest_first(items: list) -> list:
    """The slow tests longest first, each followed by one quick test taken from the end; then the
    rest in pytest's order.

    pytest-xdist hands tests out in collection order, two to a process at the start (see
    ``pytest_configure``), so a long test collected last (a compile for every architecture, a wheel
    build) would run alone at the end while the other processes sit idle, and two long tests next
    to each other would go to the same process (on the H200 this order took the suite from 282 to
    233 s; on CI's two cores, from about 30 to 22 min). The sort is stable:
    pytest's order within equal times."""
    slow = sorted((i for i in items if slow_seconds(i)), key=lambda i: -slow_seconds(i))
    quick = [i for i in items if not slow_seconds(i)]
    fillers = quick[::-1][:len(slow)]
    ordered = []
    for n, test in enumerate(slow):
        ordered += [test, fillers[n]] if n < len(fillers) else [test]
    return ordered + quick[:len(quick) - len(fillers)]


def pytest_collection_modifyitems(config, items):
    items[:] = longest_first(items)
    if ON_GPU:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (running under the simulator)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)


def assert_sanitizer_clean(tool: str, code: str, timeout: int = 1200) -> None:
    """Run ``python -c code`` under ``compute-sanitizer --tool tool`` and require zero errors.

    Host API errors are not reported (``--report-api-errors no``): cuda-bindings probes driver
    entry points with cuGetProcAddress and some probes fail by design; they are not kernel errors.
    memcheck ends with "ERROR SUMMARY: 0 errors", racecheck with "RACECHECK SUMMARY: 0 hazards
    displayed (0 errors, ...)".
    """
    import re
    import shutil
    import subprocess
    import sys

    exe = shutil.which("compute-sanitizer") or shutil.which("/usr/local/cuda/bin/compute-sanitizer")
    assert exe, "compute-sanitizer is not installed on this GPU machine"
    out = subprocess.run([exe, "--tool", tool, "--report-api-errors", "no", "--error-exitcode", "99",
                          sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    assert re.search(r"ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors", text), text[-4000:]
