"""Test configuration shared by both worlds.

The same tests run under Numba's CUDA simulator on a CPU-only machine and on a real GPU.
``SIZES`` picks small problems for the simulator and sglang's sizes on a GPU; ``@pytest.mark.gpu``
marks tests that only make sense on real hardware (sanitizer-sized runs, mapped memory).
"""

import os

import numpy as np
import pytest

from hisparse_numba import device

ON_GPU = device.backend() == "cuda"
# sglang's sizes on a GPU; HISPARSE_NUMBA_TEST_SIZES=small keeps simulator sizes there too
# (used under compute-sanitizer, which slows kernels down a hundredfold).
BIG = ON_GPU and os.environ.get("HISPARSE_NUMBA_TEST_SIZES", "") != "small"


def pytest_report_header(config):
    return f"hisparse-numba backend: {device.backend()}"


def pytest_collection_modifyitems(config, items):
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
