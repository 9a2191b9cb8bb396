"""HiSparse single-step swap-in: resolve top-k positions to hot-buffer rows, LRU eviction.

For each batch row ``b`` (request row ``rid = req_pool_indices[b]``, ``seq_len = seq_lens[b]``,
``K = num_top_k`` selected positions, a hot buffer of ``H = hot_buffer_size`` slots):

* padded row (``b >= num_real_reqs[0]``): every output lane is ``-1``; nothing else changes;
* fast path (``seq_len <= H``): position ``p`` lives in slot ``p``, so lane ``i`` gets
  ``device_buffer_locs[rid, t]`` for ``i < min(seq_len, K)`` and ``t >= 0``, else ``-1``;
  ``miss_count[b] = 0``;
* long path: the newest position ``seq_len - 1`` is served from column ``H``; a position
  resident in a hot slot is a hit; every other lane is a miss, and the m-th miss (in lane
  order) takes the m-th least-recently-used slot that holds no selected position, gets its
  tag, and its item is copied host -> device. ``lru_slots`` becomes
  ``unused evictable + filled (miss order) + hits``, each in previous LRU order.
  With a miss plan, ``miss_src[b, m]``/``miss_dst[b, m]`` record the m-th copy and
  ``miss_count[b]`` the number of misses.

Launch geometry (version 2, the tuned kernel): one CUDA block per batch row (grid ``B``, block ``block_size`` threads), so a
request's whole LRU reorder happens inside one block (``lru_slots`` are int16, and Numba has
no 16-bit atomics). Shared memory per block: a ``2K``-entry int64 open-addressing hash of the
selected positions (later reused for the miss copy list), ``K`` int16 evicted slots, ``K``
uint8 lane flags and ``block_size`` int32 scan cells: ``19K + 4 * block_size`` bytes (42 KiB
at K=2048, block 1024), independent of ``H``. Ranks are block-wide prefix scans
(``blockscan.py``: warp shuffles on a GPU, shared memory alone in the simulator). The item copy is
cooperative: the whole block walks the flattened (miss, 8-byte word) space, reading the host
pool zero-copy over PCIe.

Validation (``checks.py``, ``value_checks.py``) proves the preconditions that the kernel relies on and that
sglang leaves unchecked, with one check-kernel launch and one small read-back; a rejected call
writes nothing. The behaviour reproduced is described in ``docs/single-step-swap-in.md``.

The kernel exists as a ladder of versions (``versions.py``), each equal to the reference on every
array: ``v1_plain.py`` does the reference's stages in its order with a barrier between them (its
shared memory grows with ``H``: 38 KiB at sglang's sizes); ``v2_tuned.py``, the default, is the
kernel described above. Both launchers take ``version=``.

Read top-down: the NumPy reference, version 1 beside it, version 2 with its device functions, then
the launchers (``launch_unchecked(call)`` launches a :class:`SwapInCall` that ``check_swap_in``
accepted; ``load_cache_to_device_buffer_mla`` is the two together).

Lessons: 00 (the hot buffer), 05 (plan dtypes), 06 (plan and replay together), 07 (plan row
strides), 08 (padded batches), 09 (hot buffer size), 13 (capstone), 16 (the kernel ladder).
"""

from .checks import SwapInCall, check_swap_in, settle_swap_in
from .v2_tuned import swap_in_kernel
from .launch import kernel_args, launch_unchecked, load_cache_to_device_buffer_mla
from .reference import load_cache_to_device_buffer_mla_reference

__all__ = ["SwapInCall", "check_swap_in", "kernel_args", "launch_unchecked", "settle_swap_in",
           "load_cache_to_device_buffer_mla", "load_cache_to_device_buffer_mla_reference",
           "swap_in_kernel"]
