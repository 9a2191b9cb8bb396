"""``CATALOGUE``: every entry, with sglang's other texts and the further lessons attached."""

from __future__ import annotations

from dataclasses import replace

from . import cuda_entries, plan_entries, swap_in_entries
from .entry import Entry

# sglang's other texts for the same mistakes, keyed by the start of the entry's pattern: the C++
# RuntimeChecks behind the Python wrappers, the MTP kernel's checks, the plan-only wrapper's.
VARIANTS: dict[str, tuple[str, ...]] = {
    "speculative miss_src/miss_dst must have shape": (
        "speculative miss_src must have shape [batch, >= steps * top_k].",
        "speculative miss_dst must have shape [batch, >= steps * top_k].",
    ),
    "speculative miss_count must have shape": ("miss_count must have shape ({batch_size},)",),
    "miss_src/miss_dst row strides must match.": (
        "speculative miss_src/miss_dst row strides differ.",
        "miss_src and miss_dst row strides must match",
    ),
    "HiSparse speculative swap requires 2-4 steps": (
        "HiSparse speculative swap requires 2-4 steps.",
        "HiSparse speculative swap requires at least one step.",
        "HiSparse MTP swap requires hot_buffer_size >= top_k >= 1024, 2-4 steps, and at most 8192 total occurrences.",
    ),
    "speculative swap needs 0 < steps * top_k": (
        "HiSparse speculative swap requires positive steps/top-k and steps * top-k <= 8192, got {num_steps} * {num_top_k}.",
        "HiSparse speculative swap supports at most 8192 occurrences.",
        "HiSparse speculative swap requires a positive top_k.",
    ),
    "speculative top_k_tokens must have shape [batch, steps, top_k]": (
        "speculative top_k_tokens must have shape [batch, steps, top_k].",
        "top_k_tokens must have shape [batch, steps, top_k].",
        "top_k_tokens step dimension mismatch.",
        "top_k_tokens top-k dimension mismatch.",
    ),
    "top_k_device_locs must have shape [batch, steps, top_k]": (
        "speculative output must have shape [batch, steps, top_k].",
        "top_k_device_locs must match top_k_tokens.",
    ),
    "seq_lens must have shape [batch * steps]": ("seq_lens must provide one length per request and MTP step.",),
    "device_buffer_tokens must have shape [requests, >= hot_buffer_size + 1]": (
        "device_buffer_tokens must include an extra page.",
        "device_buffer_tokens does not cover the hot buffer",
    ),
    "state.scratch_locs must have shape": (
        "speculative scratch_locs must have shape [num_requests, capacity].",
        "speculative scratch_locs must have shape [num_requests, scratch_capacity].",
    ),
    "state.cache_index must have shape": ("speculative cache_index must have shape [num_requests, 2, hash_size].",),
    "state.cache_index hash_size must be a power of two": ("ring hash capacity must be a power of two.",),
    "state.cache_index has {rows} request rows": ("speculative cache_index request capacity is smaller than scratch_locs.",),
    "state.cache_policy must have shape": (
        "speculative cache_policy must contain one CLOCK control row and one reference-epoch row per request.",
    ),
    "state.scratch_state must have shape": (
        "speculative scratch_state must contain one counter row and one miss-metadata row per request.",
    ),
    "state.scratch_state row stride must be even": ("speculative scratch metadata stride must be 64-bit aligned.",),
    "hot_buffer_size (state.cache_policy width)": (
        "speculative hot buffer must contain at least two slots.",
        "speculative CLOCK cursor requires hot_buffer_size <= 32768.",
    ),
    "num_real_reqs must be an int32 array with shape [1]": ("num_real_reqs must be an int32 device tensor with shape [1]",),
}

# Errors that more than one lesson turns on. The undersized speculative miss plan (headline 1) is
# lesson 01's error; lesson 08 shows it again with CUDA-graph padding rows counted in the batch.
ALSO: dict[str, tuple[str, ...]] = {
    "speculative miss_src/miss_dst must have shape": ("08",),
}


def _attach(catalogue: list[Entry]) -> list[Entry]:
    out = []
    for entry in catalogue:
        variants = entry.variants + tuple(v for k, vs in VARIANTS.items() if entry.pattern.startswith(k)
                                          for v in vs)
        also = entry.also + tuple(a for k, ls in ALSO.items() if entry.pattern.startswith(k) for a in ls)
        out.append(replace(entry, variants=variants, also=also))
    return out


CATALOGUE: list[Entry] = _attach(swap_in_entries.ENTRIES + plan_entries.ENTRIES + cuda_entries.ENTRIES)
