"""``device._inline_in_nvvm``: the package's ``inline=True`` device functions are inlined by NVVM
(``forceinline``), compiled once instead of typed again at every call site; other code keeps
Numba's meaning. Tested on a stand-in for ``numba.cuda.jit`` that records its options."""

import types

import pytest

from hisparse_numba import device


def recording_jit(calls):
    def jit(*signature, **options):
        def decorate(func):
            calls.append((func.__module__, signature, options))
            return func
        return decorate
    return jit


def function_in(module_name):
    def body(x):
        return x
    body.__module__ = module_name
    return body


@pytest.mark.parametrize("with_signature", [False, True])
def test_package_functions_get_forceinline_others_keep_inline(with_signature):
    calls = []
    jit = device._inline_in_nvvm(recording_jit(calls))
    sig = ("int32(int32)",) if with_signature else ()
    jit(*sig, device=True, inline=True)(function_in("hisparse_numba.hisparse.speculative.tiles"))
    jit(*sig, device=True, inline=True)(function_in("__main__"))
    (_, sig_ours, ours), (_, sig_theirs, theirs) = calls
    assert ours == {"device": True, "inline": "never", "forceinline": True} and sig_ours == sig
    assert theirs == {"device": True, "inline": True} and sig_theirs == sig


def test_bare_decorator_and_non_inline_functions_pass_through():
    calls = []
    jit = device._inline_in_nvvm(recording_jit(calls))
    jit(device=True)(function_in("hisparse_numba.blockscan"))
    assert calls[-1][2] == {"device": True}
    assert jit.hisparse_inline == "nvvm"


def test_the_policy_is_on_outside_the_simulator_unless_numba_is_asked():
    if device.SIMULATOR:
        assert getattr(device.cuda.jit, "hisparse_inline", None) is None
    else:
        wanted = "nvvm" if device.INLINE_MODE == "nvvm" else None
        assert getattr(device.cuda.jit, "hisparse_inline", None) == wanted
