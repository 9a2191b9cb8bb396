"""hisparse-numba: sglang's HiSparse and kv-canary KV-cache kernels in Numba CUDA.

Every kernel sits beside the NumPy reference it must match exactly. ``device`` picks the world
(a CUDA GPU, or Numba's CUDA simulator on a CPU); ``hisparse`` holds the swap-in kernels and
``kv_canary`` the corruption guard.

The public names below are imported on first use, not with the package: ``hisparse-numba doctor``
and ``--help`` must work (and be quick) even when the backend cannot start. The first use imports
``device``, which chooses the world before anything imports ``numba.cuda``.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_HISPARSE = (
    "HiSparseSpecState", "alloc_miss_plan", "copy_cache_planned_mla", "copy_cache_planned_mla_reference",
    "gather_to_hot_buffer", "gather_to_hot_buffer_reference", "initialize_hisparse_spec_state",
    "initialize_hisparse_spec_state_reference", "load_cache_to_device_buffer_mla",
    "load_cache_to_device_buffer_mla_reference", "load_cache_to_device_buffer_spec_mla",
    "load_cache_to_device_buffer_spec_mla_reference", "make_hisparse_spec_state", "miss_plan_capacity",
)
_KV_CANARY = (
    "CANARY_CHAIN_ANCHOR", "VerifyPlan", "WritePlan", "launch_canary_plan_kernels",
    "launch_canary_plan_kernels_reference", "launch_canary_verify_kernel",
    "launch_canary_verify_kernel_reference", "launch_canary_write_kernel",
    "launch_canary_write_kernel_reference", "mix3", "splitmix64",
)
_SUBMODULES = ("device", "hisparse", "kv_canary")
_HOME = {**{name: "hisparse" for name in _HISPARSE}, **{name: "kv_canary" for name in _KV_CANARY}}

__all__ = ["device", *_HISPARSE, *_KV_CANARY]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _HOME:
        importlib.import_module(".device", __name__)
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
