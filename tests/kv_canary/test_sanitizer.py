"""compute-sanitizer memcheck and racecheck over the whole kv-canary pipeline (GPU only)."""

import pytest

from ..conftest import assert_sanitizer_clean

SCRIPT = r"""
import numpy as np
from hisparse_numba.kv_canary.examples import compile_examples, capacities, run_plan
from tests.kv_canary.builders import random_plan_problem
compile_examples()                       # plan (with and without SWA/pool) -> verify -> write -> verify
rng = np.random.default_rng(3)
for kind in ("loose", "tight", "under_by_one"):
    p = random_plan_problem(rng, max_bs=64, seq_lens=(256,))
    run_plan(p, *capacities(p, kind), kernel=True)
print("done")
"""


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_sanitizer_clean(tool):
    assert_sanitizer_clean(tool, SCRIPT)