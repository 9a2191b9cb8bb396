"""Test configuration shared by both worlds.

The same tests run under Numba's CUDA simulator on a CPU-only machine and on a real GPU.
``SIZES`` picks small problems for the simulator and sglang's sizes on a GPU; ``@pytest.mark.gpu``
marks tests that only make sense on real hardware (sanitizer-sized runs, mapped memory).
"""

import numpy as np
import pytest

from hisparse_numba import device

ON_GPU = device.backend() == "cuda"


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
