"""Sweep entry points of the single-step family: the gather, the LRU swap-in and the replay of its
miss plan."""

from __future__ import annotations

import numpy as np

from hisparse_numba.hisparse import (copy_cache_planned_mla, copy_cache_planned_mla_reference,
                                     gather_to_hot_buffer, gather_to_hot_buffer_reference,
                                     load_cache_to_device_buffer_mla,
                                     load_cache_to_device_buffer_mla_reference)
from hisparse_numba.hisparse.single_step.examples import make_swap_in_problem, planned_copy_args

from .harness import (EntryPoint, Mutation, alias, array_mutations, put, reference_judge,
                      scalar_mutations, value_mutation)
from .wide import wide_mutations

POOLS = ("host_cache", "device_buffer")

SWAP_IN_DTYPES = dict(top_k_tokens=(np.int32,), device_buffer_tokens=(np.int32,),
                      host_cache_locs=(np.int64,), device_buffer_locs=(np.int32,),
                      top_k_device_locs=(np.int32,), req_pool_indices=(np.int32, np.int64),
                      seq_lens=(np.int32, np.int64), lru_slots=(np.int16,),
                      num_real_reqs=(np.int32,), miss_src=(np.int64,), miss_dst=(np.int32,),
                      miss_count=(np.int32,), host_cache=(), device_buffer=())
PLAN = ("miss_src", "miss_dst", "miss_count")
SWAP_IN_WRITTEN = ("top_k_device_locs", "device_buffer_tokens", "lru_slots", "device_buffer", *PLAN)
# sglang's exact texts that do not name the argument (kept word for word on purpose)
SGLANG_TEXTS = {"item_size_bytes": ("The pointers must be multiple of 16 bytes.",)}


def checks_mutations():
    """The ``checks`` keyword: only "full" and "shapes" (a valid call under "shapes" equals the
    reference)."""
    out = [Mutation("checks: shapes (fine)", "checks", lambda c: put(c, "checks", "shapes"))]
    for label, value in (("misspelt", "shape"), ("None", None), ("bool", True), ("int", 1)):
        out.append(Mutation(f"checks: {label}", "checks",
                            lambda c, value=value: put(c, "checks", value), must_reject=True))
    return out


def judge_without_checks(reference):
    """The references take no ``checks`` keyword: they always check everything."""
    judge = reference_judge(reference)
    return lambda host, dev, result: judge({k: v for k, v in host.items() if k != "checks"}, dev, result)


def build_gather(rng):
    n_host, n_dev, n, item = 40, 24, 12, 32
    return dict(host_cache=rng.integers(0, 256, n_host * item, dtype=np.uint8),
                device_buffer=rng.integers(0, 256, n_dev * item, dtype=np.uint8),
                src_locs=rng.choice(n_host, size=n, replace=False).astype(np.int64),
                dst_locs=rng.choice(n_dev, size=n, replace=False).astype(np.int64),
                item_size_bytes=item)


def gather_mutations(call):
    out = []
    for name in ("src_locs", "dst_locs", "host_cache", "device_buffer"):
        pool = name in ("host_cache", "device_buffer")
        out += array_mutations(name, call[name], dtypes=() if pool else (np.int64,),
                               layout=not pool, any_shape=pool)
    out += scalar_mutations("item_size_bytes", call["item_size_bytes"], low=16,
                            names=SGLANG_TEXTS["item_size_bytes"], extremes=True)
    out += checks_mutations()
    host_items, dev_items = _items(call, "host_cache"), _items(call, "device_buffer")

    def setv(name, label, fn, must_reject=True):
        out.append(value_mutation(name, label, fn, must_reject=must_reject))

    setv("src_locs", "past the host pool", lambda v: np.where(np.arange(v.size) == 3, host_items, v))
    setv("src_locs", "negative", lambda v: np.where(np.arange(v.size) == 3, -1, v))
    setv("src_locs", "one item read twice", lambda v: np.concatenate([v[:1], v[:-1]]), must_reject=False)
    setv("dst_locs", "past the device pool", lambda v: np.where(np.arange(v.size) == 5, dev_items, v))
    setv("dst_locs", "negative", lambda v: np.where(np.arange(v.size) == 5, -1, v))
    setv("dst_locs", "two copies into one row", lambda v: np.concatenate([v[:1], v[:-1]]))
    out.append(alias("src_locs", "dst_locs", must_reject=False))
    out.append(alias("host_cache", "device_buffer"))
    out += wide_mutations(call, written=("device_buffer",), pools=POOLS,
                          bounds={"src_locs": (host_items,), "dst_locs": (dev_items,)})
    return out


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
        out += scalar_mutations(name, call[name], low=low, high=None, names=SGLANG_TEXTS.get(name, ()),
                                extremes=True)
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
    out.append(alias("top_k_device_locs", "miss_dst"))
    out.append(alias("device_buffer_locs", "device_buffer_tokens"))
    out.append(alias("host_cache", "device_buffer"))
    out += checks_mutations()
    out += [m for m in scalar_mutations("skip_io", 0) if m.name.endswith((": list", ": None"))]
    out.append(Mutation("skip_io: True (fine)", "skip_io", lambda c: put(c, "skip_io", True)))

    # Row 0 takes the long path, row 1 the fast path (build_swap_in: num_real 2, one fast row).
    tokens, lens, rids = call["top_k_tokens"], call["seq_lens"], call["req_pool_indices"]
    assert lens[0] > H >= lens[1]
    newest, rid0 = int(lens[0]) - 1, int(rids[0])
    tags0 = call["device_buffer_tokens"][rid0, :H]
    hit_lane = next(i for i, t in enumerate(tokens[0]) if t != newest and t in tags0)
    hit_slot = int(np.flatnonzero(tags0 == tokens[0, hit_lane])[0])
    other_slot = (hit_slot + 1) % H

    def lane(row, i, value):
        return lambda v: np.where((np.arange(v.shape[0])[:, None] == row) & (np.arange(v.shape[1]) == i), value, v)

    setv("top_k_tokens", "the newest position twice in a long row",
         lambda v: lane(0, 1, newest)(lane(0, 0, newest)(v)))
    setv("top_k_tokens", "a long-row lane at seq_len", lane(0, 2, newest + 1))
    setv("top_k_tokens", "a long-row lane past host_cache_locs' width", lane(0, 2, max_seq + 100))
    setv("top_k_tokens", "a fast-row lane at seq_len", lane(1, 0, int(lens[1])))
    setv("top_k_tokens", "a fast-row lane -1 (empty)", lane(1, 0, -1), must_reject=False)
    setv("device_buffer_tokens", "a selected position resident in two slots",
         lambda v: np.where((np.arange(v.shape[0])[:, None] == rid0) & (np.arange(v.shape[1]) == other_slot),
                            tokens[0, hit_lane], v))
    setv("device_buffer_tokens", "every slot empty (-1)", lambda v: np.full_like(v, -1), must_reject=False)
    setv("device_buffer_locs", "two requests share a device row",
         lambda v: np.where(np.arange(v.shape[0])[:, None] == int(rids[1]), v[rid0], v))
    setv("host_cache_locs", "nothing backed (-1)", lambda v: np.full_like(v, -1))
    setv("lru_slots", "a huge slot id", lambda v: np.where(v == 3, 32767, v))
    setv("seq_lens", "a long row much longer than host_cache_locs (2**31 - 1)",
         lambda v: np.where(np.arange(v.size) == 0, 2**31 - 1, v).astype(v.dtype))
    setv("req_pool_indices", "two fast rows share a request row",
         lambda v: np.concatenate([v[:1], v[1:2], v[1:2]]), must_reject=False)
    padded = np.arange(call["top_k_tokens"].shape[0]) >= int(call["num_real_reqs"][0])
    for name, garbage in (("req_pool_indices", -2**31), ("seq_lens", 2**31 - 1), ("top_k_tokens", -2**31),
                          ("seq_lens", -1), ("req_pool_indices", requests)):
        setv(name, f"padding rows {garbage} (fine)",
             lambda v, garbage=garbage: np.where(padded.reshape((-1,) + (1,) * (v.ndim - 1)), garbage, v).astype(v.dtype),
             must_reject=False)
    out += wide_mutations(call, written=SWAP_IN_WRITTEN, pools=POOLS, bounds={
        "req_pool_indices": (requests,), "seq_lens": (H, max_seq), "top_k_tokens": (H, int(lens[0])),
        "host_cache_locs": (host_items,), "device_buffer_locs": (dev_items,), "lru_slots": (H,),
        "num_real_reqs": (call["top_k_tokens"].shape[0],), "device_buffer_tokens": (H,)})
    return out


def build_planned_copy(rng):
    # two long rows: both record misses, so plans of two rows can be made to collide
    problem = make_swap_in_problem(rng, batch=3, num_top_k=8, hot_buffer_size=16, item_size_bytes=32,
                                   num_real=2, fast_rows=0, block_size=32)
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
        out += scalar_mutations(name, call[name], low=low, names=SGLANG_TEXTS.get(name, ()), extremes=True)
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
    counts = call["miss_count"]
    live = [r for r in range(int(call["num_real_reqs"][0])) if counts[r] > 0]
    setv("miss_count", "stale rows past num_real_reqs", lambda v: np.where(np.arange(v.size) >= 2, 10**6, v),
         must_reject=False)
    setv("miss_src", "stale entries past miss_count",
         lambda v: np.where(np.arange(v.shape[1]) >= counts[:, None], -5, v), must_reject=False)
    if len(live) >= 1 and counts[live[0]] >= 2:
        r = live[0]
        setv("miss_dst", "two entries of one row into one device row",
             lambda v: np.where((np.arange(v.shape[0])[:, None] == r) & (np.arange(v.shape[1]) == 1), v[r, 0], v))
    if len(live) >= 2:
        r0, r1 = live[:2]
        setv("miss_dst", "two rows into one device row",
             lambda v: np.where((np.arange(v.shape[0])[:, None] == r1) & (np.arange(v.shape[1]) == 0), v[r0, 0], v))
    out.append(alias("host_cache", "device_buffer"))
    out.append(Mutation("device_buffer: the bytes of miss_src", "device_buffer",
                        lambda c: put(c, "device_buffer", c["miss_src"].view(np.uint8).reshape(-1)),
                        must_reject=True))
    out += checks_mutations()
    out += wide_mutations(call, written=("device_buffer",), pools=POOLS, bounds={
        "miss_src": (host_items,), "miss_dst": (dev_items,), "miss_count": (width,),
        "num_real_reqs": (call["miss_src"].shape[0],)})
    return out


ENTRY_POINTS = [
    EntryPoint("gather_to_hot_buffer", build_gather, lambda c: gather_to_hot_buffer(**c),
               gather_mutations, judge_without_checks(gather_to_hot_buffer_reference)),
    EntryPoint("load_cache_to_device_buffer_mla", build_swap_in,
               lambda c: load_cache_to_device_buffer_mla(**c), swap_in_mutations,
               judge_without_checks(load_cache_to_device_buffer_mla_reference), budget=200),
    EntryPoint("copy_cache_planned_mla", build_planned_copy,
               lambda c: copy_cache_planned_mla(**c), planned_copy_mutations,
               judge_without_checks(copy_cache_planned_mla_reference), budget=130),
]
