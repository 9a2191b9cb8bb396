"""The rungs of the speculative swap-in (``speculative.versions``): the registry, the ``version=``
argument of the launchers, and what every rung's module says about itself. Each rung's
kernel == reference runs are in the scenario, victim, random and fuzz tests (``spec_version``)."""

import numpy as np
import pytest

from hisparse_numba import device
from hisparse_numba.hisparse.speculative import (check_speculative, launch_unchecked,
                                                 load_cache_to_device_buffer_spec_mla,
                                                 load_cache_to_device_buffer_spec_mla_reference)
from hisparse_numba.hisparse.speculative import versions
from hisparse_numba.hisparse.speculative.examples import (host_copy, make_spec_problem, mismatches,
                                                          run_kernel_and_reference, set_selection,
                                                          snapshot)
from tests.conftest import ON_GPU


def small(record=True):
    kw = make_spec_problem(batch=2, steps=2, top_k=8, hot=16, tail=4, item_words=2,
                           max_positions=64, record=record)
    set_selection(kw, np.arange(32).reshape(2, 2, 8) % 20 + 10, np.full(4, 40))
    return kw


def test_the_registry_names_each_rung_and_defaults_to_the_tuned_one():
    assert versions.DEFAULT == max(versions.VERSIONS) == 3
    for number, version in versions.VERSIONS.items():
        assert version.number == number and version.name.startswith(f"v{number}_")
        assert version.why and "\n" not in version.why
        module = versions.module(number)
        assert module.__name__.endswith("." + version.name)
        assert module.__doc__.strip().splitlines()[0]      # one line: what this rung changes


def test_check_version_takes_none_or_a_registered_number():
    assert versions.check_version(None) == versions.DEFAULT
    assert versions.check_version(1) == 1 and versions.check_version(np.int64(3)) == 3
    for bad in (True, 1.0, "1"):
        with pytest.raises(TypeError, match="version"):
            versions.check_version(bad)
    with pytest.raises(ValueError, match=r"version must be one of \[1, 2, 3\], got 7"):
        versions.check_version(7)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (True, TypeError)])
def test_a_bad_version_is_refused_before_anything_is_written(bad, error):
    kw = small()
    before = snapshot(kw)
    with pytest.raises(error, match="version"):
        load_cache_to_device_buffer_spec_mla(**kw, version=bad)
    call = check_speculative(**kw, for_kernel=True)
    with pytest.raises(error, match="version"):
        launch_unchecked(call, version=bad)
    after = snapshot(kw)
    assert mismatches(after, before) == []


def test_the_reference_ignores_the_version():
    kw = host_copy(small())
    again = host_copy(kw)
    load_cache_to_device_buffer_spec_mla_reference(**kw, version=1)
    load_cache_to_device_buffer_spec_mla_reference(**again)
    assert mismatches(snapshot(kw), snapshot(again)) == []


def test_launch_unchecked_runs_the_rung_it_is_given(spec_version):
    kw = small()
    ref = host_copy(kw)
    launch_unchecked(check_speculative(**kw, for_kernel=True), spec_version)
    load_cache_to_device_buffer_spec_mla_reference(**ref)
    device.synchronize()
    assert mismatches(snapshot(kw), snapshot(ref)) == []


@pytest.mark.skipif(ON_GPU, reason="only the simulator raises inside a kernel")
def test_after_an_aborted_launch_the_next_call_is_exact(spec_version):
    kw = small()
    call = check_speculative(**kw, for_kernel=True)
    with pytest.raises(IndexError):                  # plan entry 1 of a 1-column plan
        launch_unchecked(call._replace(miss_src=kw["miss_src"][:, :1],
                                       miss_dst=kw["miss_dst"][:, :1]), spec_version)
    n = kw["state"].scratch_locs.shape[0]
    assert not device.to_host(kw["state"].scratch_state)[0, n:3 * n].any()   # running counters
    got, want = run_kernel_and_reference(kw, spec_version)
    assert mismatches(got, want) == []
