"""Helpers and checker for lesson 11 (a host KV pool in pageable memory)."""

from __future__ import annotations

# Numba's own text (numba-cuda, cudadrv/devicearray.py), emitted on a GPU for every NumPy array
# argument that is not device memory or mapped pinned memory.
HOST_COPY_WARNING = "Host array used in CUDA kernel will incur copy overhead to/from device."


def bytes_per_launch(pool_nbytes: int, items: int, item_size_bytes: int) -> dict:
    """What one launch moves over PCIe: the whole pool both ways (pageable) vs the items (mapped)."""
    return {"pageable": 2 * int(pool_nbytes), "mapped": int(items) * int(item_size_bytes)}


def check_bytes(copied, needed, *, pool_items: int, item_size_bytes: int, misses: int) -> bool:
    """``copied``: bytes Numba moves per launch for a NumPy pool; ``needed``: bytes the kernel reads."""
    want = bytes_per_launch(pool_items * item_size_bytes, misses, item_size_bytes)
    ok_copied, ok_needed = int(copied) == want["pageable"], int(needed) == want["mapped"]
    if ok_copied and ok_needed:
        print(f"right: {want['pageable']:,} bytes copied per launch for {want['mapped']:,} bytes used "
              f"({want['pageable'] // want['mapped']:,}x)")
        return True
    if not ok_copied:
        print("wrong: copied: Numba copies the WHOLE pool to the device before the launch and back after it")
    if not ok_needed:
        print("wrong: needed: a mapped pool is read in place: only the missed items cross PCIe")
    return False
