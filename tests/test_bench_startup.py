"""``bench startup`` and ``bench graph``: their arguments, and the simulator's refusal."""

import argparse

import pytest

from hisparse_numba import device
from hisparse_numba.bench import graph, startup


@pytest.mark.parametrize("module", [startup, graph])
def test_arguments_parse_with_defaults(module):
    p = argparse.ArgumentParser()
    module.add_arguments(p)
    args = p.parse_args([])
    assert args.iters > 0


@pytest.mark.skipif(device.backend() == "cuda", reason="the simulator's answer")
@pytest.mark.parametrize("module", [startup, graph])
def test_refuses_without_a_gpu(module):
    p = argparse.ArgumentParser()
    module.add_arguments(p)
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        module.run(p.parse_args([]))


def test_every_family_names_a_real_function():
    import importlib

    for module, name in startup.FAMILIES.values():
        assert callable(getattr(importlib.import_module(module), name))
