"""Sweep entry points of the speculative family: the swap-in, the state initialiser, and the
allocation helpers (``make_hisparse_spec_state``, ``miss_plan_capacity``, ``alloc_miss_plan``),
whose results must be what the launchers accept."""

from __future__ import annotations

import numpy as np

import contextlib
import sys

from hisparse_numba import device
from hisparse_numba.checks import check_miss_plan
from hisparse_numba.hisparse.miss_plan import alloc_miss_plan, miss_plan_capacity
from hisparse_numba.hisparse.speculative.examples import host_copy, make_spec_problem, set_selection
from hisparse_numba.hisparse.speculative.state import (HiSparseSpecState, initialize_hisparse_spec_state,
                                                initialize_hisparse_spec_state_reference,
                                                make_hisparse_spec_state, next_sigma)
from hisparse_numba.hisparse.speculative import (check_speculative,
                                                 load_cache_to_device_buffer_spec_mla,
                                                 load_cache_to_device_buffer_spec_mla_reference)

from .harness import (EntryPoint, Mutation, alias, array_mutations, put, reference_judge,
                      scalar_mutations, value_mutation)
from .wide import wide_mutations

BATCH, STEPS, TOP_K, HOT, TAIL, CAP, WORDS = 3, 2, 8, 16, 4, 6, 2
SPEC_DTYPES = dict(top_k_tokens=(np.int32,), device_buffer_tokens=(np.int32,),
                   host_cache_locs=(np.int64,), device_buffer_locs=(np.int32,),
                   top_k_device_locs=(np.int32,), req_pool_indices=(np.int64,),
                   seq_lens=(np.int32,), num_real_reqs=(np.int32,), miss_src=(np.int64,),
                   miss_dst=(np.int32,), miss_count=(np.int32,), host_cache=(), device_buffer=())
STATE_DTYPES = dict(cache_index=(np.int64,), cache_policy=(np.int32,), scratch_locs=(np.int32,),
                    scratch_state=(np.int32,))
PLAN = ("miss_src", "miss_dst", "miss_count")
STATE = tuple(f"state.{f}" for f in STATE_DTYPES)
SPEC_WRITTEN = ("top_k_device_locs", "device_buffer_tokens", "device_buffer_locs", "device_buffer", *PLAN,
                *STATE)
# sglang's exact texts that do not name the argument (kept word for word on purpose)
SGLANG_TEXTS = {"item_size_bytes": ("The pointers must be multiple of 16 bytes.",),
                "miss_src": ("miss_src, miss_dst, and miss_count must be provided together.",
                             "speculative miss_src/miss_dst", "miss_src/miss_dst row strides"),
                "miss_dst": ("miss_src, miss_dst, and miss_count must be provided together.",
                             "speculative miss_src/miss_dst", "miss_src/miss_dst row strides"),
                "miss_count": ("miss_src, miss_dst, and miss_count must be provided together.",
                               "speculative miss_count"),
                "top_k_tokens": ("HiSparse speculative swap requires 2-4 steps",)}


def build_spec(rng):
    """Two real rows and a padded one; hits, misses repeated across steps, a tail hit, more
    misses than the scratch capacity (direct overflow)."""
    kw = make_spec_problem(batch=BATCH, steps=STEPS, top_k=TOP_K, hot=HOT, tail=TAIL,
                           item_words=WORDS, scratch_capacity=CAP, max_positions=64,
                           num_requests=4, record=True, seed=int(rng.integers(100)))
    tokens = np.stack([rng.permutation(48)[:TOP_K] for _ in range(BATCH * STEPS)])
    tokens = tokens.reshape(BATCH, STEPS, TOP_K)
    tokens[:, 1, :3] = tokens[:, 0, :3]
    tokens[0, 0, 0] = -1
    set_selection(kw, tokens, np.full(BATCH * STEPS, 48), num_real_reqs=2)
    return {**host_copy(kw), "item_size_bytes": 8 * WORDS}


def _state_array_mutations(call):
    out = []
    for name, dtypes in STATE_DTYPES.items():
        out += array_mutations(f"state.{name}", getattr(call["state"], name), dtypes=dtypes,
                               optional=False)
    return out


def spec_mutations(call):
    out = []
    for name, dtypes in SPEC_DTYPES.items():
        pool = name in ("host_cache", "device_buffer")
        out += array_mutations(name, call[name], dtypes=dtypes,
                               optional=name in PLAN, layout=not pool, any_shape=pool,
                               names=SGLANG_TEXTS.get(name, ()))
    out += _state_array_mutations(call)
    out.append(Mutation("state: a plain tuple", "state",
                        lambda c: put(c, "state", tuple(c["state"])), True))
    out += scalar_mutations("item_size_bytes", call["item_size_bytes"], low=16, optional=True,
                            names=SGLANG_TEXTS["item_size_bytes"], extremes=True)
    out.append(Mutation("checks: unknown mode", "checks", lambda c: put(c, "checks", "none"), True))
    out.append(Mutation("checks: shapes (a valid call)", "checks",
                        lambda c: put(c, "checks", "shapes"), False))
    n = call["state"].scratch_locs.shape[0]
    width = call["host_cache_locs"].shape[1]
    item = call["item_size_bytes"]
    host_items = call["host_cache"].nbytes // item
    dev_items = call["device_buffer"].nbytes // item
    rid0, rid1 = (int(r) for r in call["req_pool_indices"][:2])
    padded_rid = int(call["req_pool_indices"][2])
    sigma0 = next_sigma(int(call["state"].scratch_state[0, 3 * n + rid0]))

    def setv(path, label, fn, must_reject=True):
        out.append(value_mutation(path, label, fn, must_reject=must_reject))

    def row(i, fn):
        """Change row ``i`` of a 2-D table only."""
        def apply(v):
            v = v.copy()
            v[i] = fn(v[i])
            return v
        return apply

    first = lambda value: (lambda v: np.where(np.arange(v.size) == 0, value, v))  # noqa: E731
    setv("req_pool_indices", "past the request slots", first(n))
    setv("req_pool_indices", "negative", first(-1))
    setv("req_pool_indices", "two real rows share a request",
         lambda v: np.array([v[0], v[0], v[2]], dtype=v.dtype))
    setv("req_pool_indices", "padded row repeats a real row's request (fine)",
         lambda v: np.array([v[0], v[1], v[0]], dtype=v.dtype), must_reject=False)
    setv("req_pool_indices", "padded row past the request slots (fine)",
         lambda v: np.array([v[0], v[1], 10 * n], dtype=v.dtype), must_reject=False)
    setv("num_real_reqs", "past the batch", lambda v: v * 0 + BATCH + 1)
    setv("num_real_reqs", "negative", lambda v: v * 0 - 1)
    setv("num_real_reqs", "zero (fine)", lambda v: v * 0, must_reject=False)
    setv("num_real_reqs", "the whole batch (fine)", lambda v: v * 0 + BATCH, must_reject=False)
    setv("seq_lens", "negative", first(-3))
    setv("seq_lens", "past host_cache_locs' width", first(width + 1))
    setv("seq_lens", "2**31 - 1", first(2 ** 31 - 1))
    setv("seq_lens", "zero (fine)", first(0), must_reject=False)
    setv("seq_lens", "the full width (fine)", first(width), must_reject=False)
    setv("seq_lens", "padded row's lengths garbage (fine)",
         lambda v: np.where(np.arange(v.size) >= 2 * STEPS, -7, v), must_reject=False)
    setv("top_k_tokens", "a token twice in a step (fine)",
         lambda v: np.concatenate([v[..., :1], v[..., :1], v[..., 2:]], axis=-1), must_reject=False)
    setv("top_k_tokens", "every token invalid (fine)", lambda v: np.full_like(v, -1), must_reject=False)
    setv("top_k_tokens", "tokens past seq_len and int32 extremes (fine)",
         lambda v: np.where(np.arange(v.size).reshape(v.shape) % 3 == 0, np.int32(2 ** 31 - 1),
                            np.where(np.arange(v.size).reshape(v.shape) % 3 == 1, np.int32(-2 ** 31), v)),
         must_reject=False)
    setv("top_k_tokens", "every token a miss (fine)",
         lambda v: (np.arange(v.size).reshape(v.shape) % 40 + 8).astype(v.dtype), must_reject=False)
    setv("host_cache_locs", "backed entries past the host pool", lambda v: np.where(v >= 0, v + host_items, v))
    setv("host_cache_locs", "one selected entry just past the host pool",
         row(rid0, lambda r: np.full_like(r, host_items)))
    setv("host_cache_locs", "an unselected request's entries past the pool (fine)",
         row(padded_rid, lambda r: r + 10 * host_items), must_reject=False)
    setv("host_cache_locs", "-2 (not backed, fine)", lambda v: np.where(v % 5 == 0, -2, v), must_reject=False)
    setv("device_buffer_locs", "past the device pool", row(rid0, lambda r: r + dev_items))
    setv("device_buffer_locs", "a tail location past the device pool",
         row(rid0, lambda r: np.where(np.arange(r.size) == HOT, dev_items, r)))
    setv("device_buffer_locs", "two hot slots share one location",
         row(rid0, lambda r: np.concatenate([r[:1], r[:1], r[2:]])))
    setv("device_buffer_locs", "a tail column shares a hot slot's location",
         row(rid0, lambda r: np.where(np.arange(r.size) == HOT, r[0], r)))
    setv("device_buffer_locs", "two requests share a location",
         lambda v: np.where((np.arange(v.shape[0]) == rid1)[:, None] & (np.arange(v.shape[1]) == 0),
                            v[rid0, 0], v))
    setv("device_buffer_locs", "a hot slot without a location (-1, fine)",
         row(rid0, lambda r: np.where(np.arange(r.size) == 3, -1, r)), must_reject=False)
    setv("device_buffer_tokens", "a token twice in one row (fine)",
         row(rid0, lambda r: np.concatenate([r[:1], r[:1], r[2:]])), must_reject=False)
    setv("device_buffer_tokens", "garbage hot tokens (fine)",
         row(rid0, lambda r: (r * 7919) % 1000 - 500), must_reject=False)
    setv("state.scratch_locs", "-1 in a real request's landing zone", row(rid0, lambda r: np.where(np.arange(r.size) == 0, -1, r)))
    setv("state.scratch_locs", "past the device pool", row(rid0, lambda r: r + dev_items))
    setv("state.scratch_locs", "a location twice in one row", row(rid0, lambda r: np.concatenate([r[:1], r[:1], r[2:]])))
    setv("state.scratch_locs", "aliases a hot location", lambda v: _with(v, rid0, 0, rid0 * (HOT + TAIL + CAP)))
    setv("state.scratch_locs", "aliases another request's scratch entry",
         lambda v: _with(v, rid1, 0, int(v[rid0, 0])))
    setv("state.scratch_locs", "an unselected request's landing zone unassigned (fine)",
         row(padded_rid, lambda r: np.full_like(r, -1)), must_reject=False)
    setv("state.scratch_state", "running counters not zero",
         lambda v: _with(v, 0, n + rid0, 5))
    setv("state.scratch_state", "union-hit counter not zero",
         lambda v: _with(v, 0, 2 * n + rid0, 1))
    setv("state.scratch_state", "a metadata row that looks full (the coming scratch epoch)",
         row(rid0 + 1, lambda r: _full_table(r, sigma0)))
    setv("state.scratch_state", "one table entry of the coming scratch epoch",
         row(rid0 + 1, lambda r: _full_table(r, sigma0, count=1)))
    setv("state.scratch_state", "generation near the wrap (fine)",
         lambda v: _with(v, 0, 3 * n + rid0, 2 ** 31 - 1), must_reject=False)
    setv("state.scratch_state", "degraded hash bit (fine)",
         lambda v: _with(v, 0, 3 * n + rid0, -2 ** 31 + 7), must_reject=False)
    setv("state.cache_policy", "negative reference epoch", lambda v: _with(v, rid0 + 1, 2, -5))
    setv("state.cache_policy", "reference epoch of PROPOSED's range", lambda v: _with(v, rid0 + 1, 2, -2 ** 31 + 1))
    setv("state.cache_policy", "reference epoch too large", lambda v: _with(v, rid0 + 1, 2, 2 ** 30))
    setv("state.cache_policy", "CLOCK word garbage (fine)", lambda v: _with(v, 0, rid0, -12345), must_reject=False)
    setv("state.cache_index", "entries pointing past the hot buffer (fine, a hint)",
         lambda v: np.where(v >= 0, v + (np.int64(1000) << 32), v), must_reject=False)
    setv("state.cache_index", "garbage entries (fine, a hint)",
         lambda v: np.arange(v.size, dtype=np.int64).reshape(v.shape) * 2654435761 % 2 ** 40 - 2 ** 20,
         must_reject=False)
    setv("item_size_bytes", "twice the item (the pools hold half as many)", lambda v: v * 2)
    setv("miss_count", "stale counts (fine)", lambda v: v + 100, must_reject=False)
    return out + _spec_aliases() + spec_wide_mutations(call)


def _spec_aliases():
    return [alias("top_k_tokens", "top_k_device_locs"), alias("device_buffer_tokens", "device_buffer_locs"),
            Mutation("top_k_device_locs: a view into device_buffer_locs", "top_k_device_locs",
                     _view_into("device_buffer_locs", "top_k_device_locs"), True),
            Mutation("miss_dst: a view into state.scratch_state", "miss_dst",
                     _view_into("state.scratch_state", "miss_dst"), True)]


def spec_wide_mutations(call):
    """``wide.py``'s mutations of a speculative call, with the bounds its values are checked
    against, and the padded row's tokens at the int32 extremes."""
    n, width = call["state"].scratch_locs.shape[0], call["host_cache_locs"].shape[1]
    item = call["item_size_bytes"]
    host_items, dev_items = call["host_cache"].nbytes // item, call["device_buffer"].nbytes // item
    padded = value_mutation("top_k_tokens", "padded row's tokens at the int32 extremes (fine)",
                            lambda v: np.where(np.arange(BATCH)[:, None, None] >= 2, np.int32(-2 ** 31), v),
                            must_reject=False)
    return [padded] + wide_mutations(call, written=SPEC_WRITTEN, pools=("host_cache", "device_buffer"), bounds={
        "req_pool_indices": (n,), "seq_lens": (width,), "top_k_tokens": (48, HOT),
        "host_cache_locs": (host_items,), "device_buffer_locs": (dev_items,),
        "state.scratch_locs": (dev_items,), "num_real_reqs": (BATCH,), "device_buffer_tokens": (HOT,)})


def _with(v, i, j, value):
    v = v.copy()
    v[i, j] = value
    return v


def _full_table(r, sigma, count=None):
    """Metadata row ``r`` (int32) whose first ``count`` (all T) table entries carry epoch sigma."""
    r = r.copy()
    table = r[:2 * STEPS * TOP_K].view(np.int64)
    k = table.size if count is None else count
    table[:k] = (np.int64(sigma) << 32) | np.arange(k, dtype=np.int64)
    return r


def _view_into(src_path, dst_path):
    def apply(call):
        from .harness import get
        base, want = get(call, src_path), get(call, dst_path)
        need = int(np.prod(want.shape))
        if base.dtype == want.dtype and base.size >= need:
            put(call, dst_path, base.reshape(-1)[:need].reshape(want.shape))
        else:   # reinterpret the bytes
            flat = base.reshape(-1).view(np.uint8)[:need * want.itemsize].view(want.dtype)
            put(call, dst_path, flat.reshape(want.shape))
    return apply


# ---------------------------------------------------------------------------------------------
# initialize_hisparse_spec_state

def build_initialize(rng):
    kw = host_copy(make_spec_problem(batch=2, steps=STEPS, top_k=TOP_K, hot=HOT, tail=TAIL,
                                     item_words=WORDS, scratch_capacity=CAP, max_positions=64,
                                     num_requests=4))
    dbt = kw["device_buffer_tokens"].copy()
    dbt[:, :HOT] = rng.permutation(64)[:HOT]
    return dict(device_buffer_tokens=dbt, req_pool_indices=np.array([2, 0], dtype=np.int64),
                state=kw["state"])


def initialize_mutations(call):
    out = []
    out += array_mutations("device_buffer_tokens", call["device_buffer_tokens"], dtypes=(np.int32,))
    out += array_mutations("req_pool_indices", call["req_pool_indices"], dtypes=(np.int64,))
    out += _state_array_mutations(call)
    out.append(Mutation("checks: unknown mode", "checks", lambda c: put(c, "checks", "all"), True))
    n = call["state"].scratch_locs.shape[0]

    def setv(path, label, fn, must_reject=True):
        out.append(value_mutation(path, label, fn, must_reject=must_reject))

    setv("req_pool_indices", "past the request slots", lambda v: np.array([v[0], n], dtype=v.dtype))
    setv("req_pool_indices", "negative", lambda v: np.array([-1, v[1]], dtype=v.dtype))
    setv("req_pool_indices", "duplicate", lambda v: np.array([v[0], v[0]], dtype=v.dtype))
    setv("req_pool_indices", "every request (fine)", lambda v: np.arange(n, dtype=v.dtype), must_reject=False)
    setv("device_buffer_tokens", "a token in two hot slots (fine)",
         lambda v: np.concatenate([v[:, :1], v[:, :1], v[:, 2:]], axis=1), must_reject=False)
    setv("device_buffer_tokens", "negative and huge tokens (fine)",
         lambda v: np.where(np.arange(v.shape[1]) % 2 == 0, -7, 2 ** 31 - 1 - np.arange(v.shape[1])).astype(v.dtype)[None].repeat(v.shape[0], 0),
         must_reject=False)
    out += wide_mutations(call, written=("state.cache_index", "state.cache_policy", "state.scratch_state"),
                          bounds={"req_pool_indices": (n,), "device_buffer_tokens": (HOT,)})
    return out


# ---------------------------------------------------------------------------------------------
# make_hisparse_spec_state, miss_plan_capacity, alloc_miss_plan: what they return is accepted

def build_make_state(rng):
    return dict(num_requests=3, hot_buffer_size=HOT, num_steps=STEPS, num_top_k=TOP_K,
                scratch_capacity=CAP)


def make_state_mutations(call):
    out = []
    for name, low, high in (("num_requests", 1, HOT), ("hot_buffer_size", 3, 32768),
                            ("num_steps", 2, 4), ("num_top_k", 1, 4096), ("scratch_capacity", 1, 8192)):
        out += scalar_mutations(name, call[name], low=low, high=high, optional=name == "scratch_capacity")
    for name, value in (("num_requests", 16), ("hot_buffer_size", 2), ("num_steps", 4),
                        ("num_top_k", 1), ("scratch_capacity", 1), ("scratch_capacity", None)):
        out.append(Mutation(f"{name}: {value} (fine)", name,
                            lambda c, name=name, value=value: put(c, name, value), False))
    return out


def judge_make_state(host_call, device_call, state):
    """The state must be accepted by the initialiser and, with a landing zone, by the swap-in."""
    with quick_thread_switches():
        return _judge_make_state(device_call, state)


def _judge_make_state(device_call, state):
    if not isinstance(state, HiSparseSpecState):
        return f"returned {type(state).__name__}"
    n, cap = state.scratch_locs.shape
    hot, steps, top_k = (device_call[k] for k in ("hot_buffer_size", "num_steps", "num_top_k"))
    per_req = hot + cap
    xp = device.xp
    dbt = xp.asarray(np.tile(np.arange(hot, dtype=np.int32), (n, 1)))
    initialize_hisparse_spec_state(device_buffer_tokens=dbt, req_pool_indices=xp.arange(n, dtype=xp.int64),
                                   state=state)
    state.scratch_locs[...] = xp.asarray(np.arange(n)[:, None] * per_req + hot + np.arange(cap)).astype(xp.int32)
    batch = min(n, 2)
    host_cache = device.host_cache_array((64, 2), np.int64)
    dbl = xp.asarray((np.arange(n)[:, None] * per_req + np.arange(hot)).astype(np.int32))
    src, dst, count = alloc_miss_plan(batch, steps, top_k)
    check_speculative(
        top_k_tokens=xp.zeros((batch, steps, top_k), dtype=xp.int32), device_buffer_tokens=dbt,
        host_cache_locs=xp.asarray(np.tile(np.arange(64), (n, 1))), device_buffer_locs=dbl,
        host_cache=host_cache, device_buffer=xp.zeros((n * per_req, 2), dtype=xp.int64),
        top_k_device_locs=xp.zeros((batch, steps, top_k), dtype=xp.int32),
        req_pool_indices=xp.arange(batch, dtype=xp.int64),
        seq_lens=xp.full(batch * steps, 64, dtype=xp.int32), state=state,
        num_real_reqs=xp.asarray(np.array([batch], dtype=np.int32)), miss_src=src, miss_dst=dst,
        miss_count=count, for_kernel=True)
    return None


def build_alloc_plan(rng):
    return dict(batch=3, num_steps=STEPS, num_top_k=TOP_K)


def alloc_plan_mutations(call):
    out = []
    for name, low in (("batch", 1), ("num_steps", 1), ("num_top_k", 1)):
        out += scalar_mutations(name, call[name], low=low)
    out.append(Mutation("num_steps: 5", "num_steps", lambda c: put(c, "num_steps", 5), True))
    out.append(Mutation("batch: 64 (fine)", "batch", lambda c: put(c, "batch", 64), False))
    return out


def judge_alloc_plan(host_call, device_call, plan):
    """The plan fits a swap-in of that batch, steps and top_k (checked shapes)."""
    batch, steps, top_k = (device_call[k] for k in ("batch", "num_steps", "num_top_k"))
    cap = miss_plan_capacity(steps, top_k)
    src, dst, count = plan
    if src.shape != (batch, cap) or dst.shape != (batch, cap) or count.shape != (batch,):
        return f"plan shapes {src.shape} {dst.shape} {count.shape}"
    capacity = top_k if steps == 1 else cap      # num_steps = 1: a single-step plan
    check_miss_plan(src, dst, count, batch=batch, capacity=capacity, shape_message="plan shape",
                    count_message="count shape")
    return None


@contextlib.contextmanager
def quick_thread_switches():
    """The simulator runs a block's threads as Python threads that meet at every barrier; the
    default 5 ms switch interval makes a barrier-heavy kernel wait most of its time."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def call_spec(c):
    with quick_thread_switches():
        load_cache_to_device_buffer_spec_mla(**c)


def call_initialize(c):
    with quick_thread_switches():
        initialize_hisparse_spec_state(**c)


def call_make_state(c):
    with quick_thread_switches():
        return make_hisparse_spec_state(**c)


ENTRY_POINTS = [
    EntryPoint("load_cache_to_device_buffer_spec_mla", build_spec, call_spec, spec_mutations,
               reference_judge(load_cache_to_device_buffer_spec_mla_reference), budget=220),
    EntryPoint("initialize_hisparse_spec_state", build_initialize,
               call_initialize, initialize_mutations,
               reference_judge(initialize_hisparse_spec_state_reference), budget=120),
    EntryPoint("make_hisparse_spec_state", build_make_state,
               call_make_state, make_state_mutations, judge_make_state),
    EntryPoint("alloc_miss_plan", build_alloc_plan, lambda c: alloc_miss_plan(**c),
               alloc_plan_mutations, judge_alloc_plan),
]
