"""HiSparse: the per-request GPU hot buffer in front of a host KV pool.

Read in this order: ``gather`` (moving items host -> device; its checks in ``gather_checks``),
``swap_in`` (the single-step LRU swap-in; its checks in ``swap_in_checks``, the position hash in
``swap_in_hash``), ``planned_copy`` (replaying its miss plan into other layers; its checks in
``planned_copy_checks``; the argument checks the three share are ``hisparse_numba.checks``), ``miss_plan``
(sizing a plan), ``spec_hash``, ``spec_state`` and ``speculative/`` (the multi-step swap-in of
speculative decoding). Each launcher is ``check_<family>(...)`` (the accepted call) then its
module's ``launch_unchecked(call)``. The behaviour: ``docs/single-step-swap-in.md`` and
``docs/speculative-swap-in.md``.
"""

from .gather import gather_to_hot_buffer, gather_to_hot_buffer_reference
from .miss_plan import alloc_miss_plan, miss_plan_capacity
from .planned_copy import copy_cache_planned_mla, copy_cache_planned_mla_reference
from .spec_state import (
    HiSparseSpecState,
    initialize_hisparse_spec_state,
    initialize_hisparse_spec_state_reference,
    make_hisparse_spec_state,
)
from .speculative import (
    load_cache_to_device_buffer_spec_mla,
    load_cache_to_device_buffer_spec_mla_reference,
)
from .swap_in import load_cache_to_device_buffer_mla, load_cache_to_device_buffer_mla_reference

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
