"""One accepted single-step swap-in call (:class:`SwapInCall`): what ``checks.check_swap_in``
returns, ``value_checks`` judges on the device and ``launch.launch_unchecked`` launches."""

from __future__ import annotations

from typing import NamedTuple


class SwapInCall(NamedTuple):
    """One accepted single-step swap-in: the derived configuration and every array of the call.

    :func:`check_swap_in` builds it; ``launch.launch_unchecked`` launches it as it is. A lesson
    that shows what the kernel does with an input the check rejects builds one by hand (or
    ``_replace``s one field of an accepted call).
    """

    batch: int                 # rows of top_k_tokens: the grid
    num_real: int | None       # rows >= num_real are CUDA-graph padding (None: not read back,
    #                            checks="shapes" with a num_real_reqs array)
    num_top_k: int             # K
    hot_buffer_size: int       # H
    block_size: int
    record_plan: bool          # miss_src/miss_dst/miss_count given
    skip_io: bool              # plan and update tables, move no bytes
    item_size_bytes: int
    top_k_tokens: object
    device_buffer_tokens: object
    host_cache_locs: object
    device_buffer_locs: object
    host_cache: object
    device_buffer: object
    top_k_device_locs: object
    req_pool_indices: object
    seq_lens: object
    lru_slots: object
    num_real_reqs: object      # [1] int32 device array
    miss_src: object = None
    miss_dst: object = None
    miss_count: object = None
    gate: object = None        # the value check's flags (value_flags.start_check); None: always open
    pending: object = None     # that check's value_flags.ValueCheck until settle_swap_in takes its verdict
