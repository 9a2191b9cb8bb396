"""``hisparse-numba warmup``: its steps exist, its progress bar, the simulator's answer."""

import importlib
import io

import pytest

from hisparse_numba import device, warmup


@pytest.mark.parametrize("which", ["lessons", "tests", "all"])
def test_every_step_names_a_real_function(which):
    steps = warmup.steps_for(which)
    assert steps and set(warmup.LESSON_STEPS) <= set(steps)
    for _, module, name in steps:
        assert callable(getattr(importlib.import_module(module), name))


def test_progress_bar():
    assert warmup.progress_bar(0, 4, "x", width=8) == "[........] 0/4 x"
    assert warmup.progress_bar(2, 4, "x", width=8) == "[####....] 2/4 x"
    assert warmup.progress_bar(4, 4, "x", width=8) == "[########] 4/4 x"


@pytest.mark.skipif(device.backend() == "cuda", reason="the simulator's answer")
def test_simulator_has_nothing_to_compile():
    out = io.StringIO()
    assert warmup.warmup("all", out=out) == 0
    assert "nothing to compile" in out.getvalue()


@pytest.mark.gpu
def test_warmup_fills_the_cache():
    out = io.StringIO()
    assert warmup.warmup("lessons", out=out) == len(warmup.LESSON_STEPS)
    assert device.kernel_cache_info()["entries"] > 0
    assert "4/4" in out.getvalue()
