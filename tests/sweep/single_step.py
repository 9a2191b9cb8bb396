"""Sweep entry points of the single-step family: the LRU swap-in and the replay of its miss plan."""

from __future__ import annotations

import numpy as np

from hisparse_numba.hisparse import (copy_cache_planned_mla, copy_cache_planned_mla_reference,
                                     load_cache_to_device_buffer_mla,
                                     load_cache_to_device_buffer_mla_reference)
from hisparse_numba.hisparse.examples import make_swap_in_problem, planned_copy_args

from .harness import (EntryPoint, alias, array_mutations, reference_judge, scalar_mutations,
                      value_mutation)

SWAP_IN_DTYPES = dict(top_k_tokens=(np.int32,), device_buffer_tokens=(np.int32,),
                      host_cache_locs=(np.int64,), device_buffer_locs=(np.int32,),
                      top_k_device_locs=(np.int32,), req_pool_indices=(np.int32, np.int64),
                      seq_lens=(np.int32, np.int64), lru_slots=(np.int16,),
                      num_real_reqs=(np.int32,), miss_src=(np.int64,), miss_dst=(np.int32,),
                      miss_count=(np.int32,), host_cache=(), device_buffer=())
PLAN = ("miss_src", "miss_dst", "miss_count")
# sglang's exact texts that do not name the argument (kept word for word on purpose)
SGLANG_TEXTS = {"item_size_bytes": ("The pointers must be multiple of 16 bytes.",)}


def build_swap_in(rng):
    return make_swap_in_problem(rng, batch=3, num_top_k=8, hot_buffer_size=16, item_size_bytes=32,
                                num_real=2, block_size=32)


def _items(call, name):
    return call[name].size * call[name].itemsize // call["item_size_bytes"]


def swap_in_mutations(call):
    out = []
    for name, dtypes in SWAP_IN_DTYPES.items():
        pool = name in ("host_cache", "device_buffer")
        out += array_mutations(name, call[name], dtypes=dtypes,
                               optional=name in PLAN or name == "num_real_reqs",
                               layout=not pool, any_shape=pool)
    for name, low in (("item_size_bytes", 16), ("num_top_k", 1), ("hot_buffer_size", 1),
                      ("page_size", 1), ("block_size", 32)):
        out += scalar_mutations(name, call[name], low=low, high=None, names=SGLANG_TEXTS.get(name, ()))
    out += scalar_mutations("skip_io", 0)[:5]
    requests = call["device_buffer_tokens"].shape[0]
    max_seq = call["host_cache_locs"].shape[1]
    host_items, dev_items = _items(call, "host_cache"), _items(call, "device_buffer")
    H = call["hot_buffer_size"]

    def setv(name, label, fn, must_reject=True):
        out.append(value_mutation(name, label, fn, must_reject=must_reject))

    setv("req_pool_indices", "past the request pool", lambda v: np.where(np.arange(v.size) == 0, requests, v))
    setv("req_pool_indices", "negative", lambda v: np.where(np.arange(v.size) == 0, -1, v))
    setv("req_pool_indices", "duplicate", lambda v: np.concatenate([v[:1], v[:1], v[2:]]))
    setv("seq_lens", "negative", lambda v: np.where(np.arange(v.size) == 0, -3, v))
    setv("seq_lens", "past host_cache_locs' width", lambda v: np.where(np.arange(v.size) == 0, max_seq + 5, v))
    setv("seq_lens", "zero", lambda v: np.where(np.arange(v.size) == 0, 0, v), must_reject=False)
    setv("host_cache_locs", "backed entries past the host pool", lambda v: np.where(v >= 0, v + host_items, v))
    setv("host_cache_locs", "-2 (not backed)", lambda v: np.where(v >= 0, v, -2), must_reject=False)
    setv("device_buffer_locs", "past the device pool", lambda v: np.where(v >= 0, v + dev_items, v))
    setv("device_buffer_locs", "two hot slots share one location",
         lambda v: np.concatenate([v[:, :1], v[:, :1], v[:, 2:]], axis=1))
    setv("device_buffer_locs", "a hot slot without a location (-1)",
         lambda v: np.concatenate([np.full_like(v[:, :1], -1), v[:, 1:]], axis=1))
    setv("device_buffer_tokens", "a token twice in one row",
         lambda v: np.concatenate([v[:, :1], v[:, :1], v[:, 2:]], axis=1), must_reject=False)
    setv("lru_slots", "slot id past the hot buffer", lambda v: np.where(v == 0, H, v))
    setv("lru_slots", "negative slot id", lambda v: np.where(v == 0, -1, v))
    setv("lru_slots", "not a permutation", lambda v: np.where(v == 1, 0, v))
    setv("top_k_tokens", "a token twice in a row",
         lambda v: np.concatenate([v[:, :1], v[:, :1], v[:, 2:]], axis=1), must_reject=False)
    setv("top_k_tokens", "every token invalid", lambda v: np.full_like(v, -1), must_reject=False)
    setv("num_real_reqs", "past the batch", lambda v: v + 2)
    setv("num_real_reqs", "negative", lambda v: v * 0 - 1)
    setv("num_real_reqs", "zero", lambda v: v * 0, must_reject=False)
    out.append(alias("top_k_tokens", "top_k_device_locs"))
    return out


def build_planned_copy(rng):
    problem = build_swap_in(rng)
    load_cache_to_device_buffer_mla_reference(**problem)
    layer = rng.integers(0, 256, problem["device_buffer"].size, dtype=np.uint8)
    return planned_copy_args(problem, layer, num_blocks=2, block_size=64)


def planned_copy_mutations(call):
    out = []
    for name, dtypes in (("miss_src", (np.int64,)), ("miss_dst", (np.int32,)),
                         ("miss_count", (np.int32,)), ("num_real_reqs", (np.int32,)),
                         ("host_cache", ()), ("device_buffer", ())):
        pool = name in ("host_cache", "device_buffer")
        out += array_mutations(name, call[name], dtypes=dtypes, layout=not pool, any_shape=pool)
    for name, low in (("item_size_bytes", 16), ("num_blocks", 1), ("block_size", 32)):
        out += scalar_mutations(name, call[name], low=low, names=SGLANG_TEXTS.get(name, ()))
    out += scalar_mutations("skip_io", 0)[:5]
    host_items, dev_items = _items(call, "host_cache"), _items(call, "device_buffer")
    width = call["miss_src"].shape[1]

    def setv(name, label, fn, must_reject=True):
        out.append(value_mutation(name, label, fn, must_reject=must_reject))

    setv("miss_src", "past the host pool", lambda v: np.where(v >= 0, v + host_items, v))
    setv("miss_src", "negative", lambda v: np.full_like(v, -1))
    setv("miss_dst", "past the device pool", lambda v: np.where(v >= 0, v + dev_items, v))
    setv("miss_dst", "negative", lambda v: np.full_like(v, -1))
    setv("miss_dst", "two copies into one row", lambda v: np.concatenate([v[:, :1], v[:, :1], v[:, 2:]], axis=1))
    setv("miss_count", "past the plan width", lambda v: np.full_like(v, width + 1))
    setv("miss_count", "negative", lambda v: np.full_like(v, -1))
    setv("miss_count", "zero", lambda v: np.zeros_like(v), must_reject=False)
    setv("num_real_reqs", "past the plan rows", lambda v: v * 0 + call["miss_src"].shape[0] + 1)
    setv("num_real_reqs", "negative", lambda v: v * 0 - 1)
    return out


ENTRY_POINTS = [
    EntryPoint("load_cache_to_device_buffer_mla", build_swap_in,
               lambda c: load_cache_to_device_buffer_mla(**c), swap_in_mutations,
               reference_judge(load_cache_to_device_buffer_mla_reference)),
    EntryPoint("copy_cache_planned_mla", build_planned_copy,
               lambda c: copy_cache_planned_mla(**c), planned_copy_mutations,
               reference_judge(copy_cache_planned_mla_reference)),
]
