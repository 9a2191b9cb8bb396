"""HiSparse: the per-request GPU hot buffer in front of a host KV pool.

Files and packages, in reading order (each family package's ``__init__`` lists its own files,
the NumPy reference first):

* ``gather.py`` (moving items host -> device, the on-ramp of lesson 00; its checks in
  ``gather_checks.py``);
* ``single_step/``: the single-step LRU swap-in and the replay of its miss plan into other layers
  (``planned_copy``); behaviour in docs/single-step-swap-in.md;
* ``speculative/``: the multi-step swap-in of speculative decoding, with its state (``state``,
  ``hash``); behaviour in docs/speculative-swap-in.md;
* ``miss_plan.py`` (sizing a plan, shared by both) and ``limits.py`` (the sizes kernels are built for).

Each launcher checks (``check_<family>``, the device value pass enqueued), launches the gated
kernel (``launch_unchecked(call)``) and takes the verdict; the gather, whose kernel lesson 00
launches by hand without a gate, takes the verdict before it launches.
"""

from .gather import gather_to_hot_buffer, gather_to_hot_buffer_reference
from .miss_plan import alloc_miss_plan, miss_plan_capacity
from .single_step.planned_copy import copy_cache_planned_mla, copy_cache_planned_mla_reference
from .speculative.state import (
    HiSparseSpecState,
    initialize_hisparse_spec_state,
    initialize_hisparse_spec_state_reference,
    make_hisparse_spec_state,
)
from .speculative import (
    load_cache_to_device_buffer_spec_mla,
    load_cache_to_device_buffer_spec_mla_reference,
)
from .single_step import load_cache_to_device_buffer_mla, load_cache_to_device_buffer_mla_reference

__all__ = [
    "HiSparseSpecState",
    "alloc_miss_plan",
    "copy_cache_planned_mla",
    "copy_cache_planned_mla_reference",
    "gather_to_hot_buffer",
    "gather_to_hot_buffer_reference",
    "initialize_hisparse_spec_state",
    "initialize_hisparse_spec_state_reference",
    "load_cache_to_device_buffer_mla",
    "load_cache_to_device_buffer_mla_reference",
    "load_cache_to_device_buffer_spec_mla",
    "load_cache_to_device_buffer_spec_mla_reference",
    "make_hisparse_spec_state",
    "miss_plan_capacity",
]
