"""Moving KV items: the device functions every copy kernel shares.

An item is ``item_size_bytes`` contiguous bytes at ``base + loc * item_size_bytes`` in a
byte pool (the host KV pool or the device buffer). Kernels see both pools as 1-D uint64
arrays (``device.byte_words``), so an item is ``item_size_bytes // 8`` consecutive words.

sglang moves 16-byte chunks with vector loads, which is why it needs item sizes and base
addresses that are multiples of 16 (``checks.check_item_copy`` enforces it here too).
Numba has no 16-byte load, so threads move 8-byte words. Reads of the host pool cross PCIe
(about a microsecond each), so both functions issue several independent loads before the
first store: the more reads in flight, the closer a kernel gets to the PCIe floor.

* ``copy_item_dev``: a group of lanes (a warp-sized group, in practice) copies ONE item.
* ``copy_items_flat_dev``: a whole block copies a LIST of items; the block walks the flattened
  (item, word) space, so consecutive threads read consecutive words (coalesced) whatever
  the item size.
* ``item_rows``: the NumPy references' view of a pool, one row of bytes per item.

Lessons: 00 (the hot buffer), 10 (16-byte alignment).
"""

import numpy as np

from .device import cuda


def item_rows(pool, item_size_bytes: int) -> np.ndarray:
    """``pool``'s bytes as ``[items, item_size_bytes]`` uint8 rows (a view, for the references).

    ``np.asarray`` first: on a GPU the host pool is Numba's mapped array, an ndarray subclass
    whose ``reshape`` is the device array's; the plain NumPy view of the same memory is what a
    reference needs.
    """
    flat = np.asarray(pool).reshape(-1).view(np.uint8)
    return flat[:flat.size // item_size_bytes * item_size_bytes].reshape(-1, item_size_bytes)


@cuda.jit(device=True, inline=True)
def copy_item_dev(src_words, src_loc, dst_words, dst_loc, words_per_item, lane, num_lanes):
    """Copy item ``src_loc`` of ``src_words`` to item ``dst_loc`` of ``dst_words``.

    ``num_lanes`` threads call this together with ``lane`` in ``[0, num_lanes)``; lane ``l``
    moves 16-byte chunks ``l, l + num_lanes, ...``. ``words_per_item`` is even.
    """
    src = src_loc * words_per_item
    dst = dst_loc * words_per_item
    w = 2 * lane
    step = 2 * num_lanes
    # Two chunks (four loads) in flight per lane while both fit, then one chunk at a time.
    while w + step < words_per_item:
        a = src_words[src + w]
        b = src_words[src + w + 1]
        c = src_words[src + w + step]
        d = src_words[src + w + step + 1]
        dst_words[dst + w] = a
        dst_words[dst + w + 1] = b
        dst_words[dst + w + step] = c
        dst_words[dst + w + step + 1] = d
        w += 2 * step
    while w < words_per_item:
        a = src_words[src + w]
        b = src_words[src + w + 1]
        dst_words[dst + w] = a
        dst_words[dst + w + 1] = b
        w += step


@cuda.jit(device=True, inline=True)
def copy_items_flat_dev(src_words, src_locs, src_off, dst_words, dst_locs, dst_off, count,
                    words_per_item, tid, num_threads):
    """``num_threads`` threads copy items ``m < count``: ``src_locs[src_off + m]`` of
    ``src_words`` to ``dst_locs[dst_off + m]`` of ``dst_words``.

    Thread ``tid`` moves flat words ``g = tid, tid + num_threads, ...`` of the ``count *
    words_per_item`` words (word ``g`` belongs to item ``g // words_per_item``), four loads in
    flight at a time. ``src_locs``/``dst_locs`` may be shared or global arrays (the fused
    swap-in keeps both lists in one shared array, hence the offsets).
    """
    total = count * words_per_item
    g = tid
    while g + 3 * num_threads < total:
        g1 = g + num_threads
        g2 = g1 + num_threads
        g3 = g2 + num_threads
        m0 = g // words_per_item
        m1 = g1 // words_per_item
        m2 = g2 // words_per_item
        m3 = g3 // words_per_item
        w0 = g - m0 * words_per_item
        w1 = g1 - m1 * words_per_item
        w2 = g2 - m2 * words_per_item
        w3 = g3 - m3 * words_per_item
        a = src_words[src_locs[src_off + m0] * words_per_item + w0]
        b = src_words[src_locs[src_off + m1] * words_per_item + w1]
        c = src_words[src_locs[src_off + m2] * words_per_item + w2]
        d = src_words[src_locs[src_off + m3] * words_per_item + w3]
        dst_words[dst_locs[dst_off + m0] * words_per_item + w0] = a
        dst_words[dst_locs[dst_off + m1] * words_per_item + w1] = b
        dst_words[dst_locs[dst_off + m2] * words_per_item + w2] = c
        dst_words[dst_locs[dst_off + m3] * words_per_item + w3] = d
        g += 4 * num_threads
    while g < total:
        m = g // words_per_item
        w = g - m * words_per_item
        dst_words[dst_locs[dst_off + m] * words_per_item + w] = \
            src_words[src_locs[src_off + m] * words_per_item + w]
        g += num_threads
