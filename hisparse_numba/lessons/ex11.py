"""Lesson 11 (a host KV pool in pageable memory): helpers, the checker and the lesson's figure."""

from __future__ import annotations

from .common import Verdict, checker, figure, is_unanswered, report, show, whole_number, wrong

# Numba's own text (numba-cuda, cudadrv/devicearray.py), emitted on a GPU for every NumPy array
# argument that is not device memory or mapped pinned memory.
HOST_COPY_WARNING = "Host array used in CUDA kernel will incur copy overhead to/from device."


def bytes_per_launch(pool_nbytes: int, items: int, item_size_bytes: int) -> dict:
    """What one launch moves over PCIe: the whole pool both ways (pageable) vs the items (mapped)."""
    return {"pageable": 2 * int(pool_nbytes), "mapped": int(items) * int(item_size_bytes)}


@checker
def check_bytes(copied, needed, *, pool_items: int, item_size_bytes: int, misses: int) -> bool:
    """Exercise 11-a. ``copied``: bytes Numba moves per launch for a NumPy pool; ``needed``: bytes
    the kernel reads from a mapped pool."""
    want = bytes_per_launch(pool_items * item_size_bytes, misses, item_size_bytes)
    if is_unanswered(copied) or is_unanswered(needed):
        raise Verdict("not yet", "replace ... with a number of bytes")
    copied, needed = whole_number(copied, "copied"), whole_number(needed, "needed")
    if copied != want["pageable"]:
        if copied == want["pageable"] // 2:
            wrong("copied: that is one direction; Numba copies the pool to the device before the launch "
                  "AND back after it")
        if copied == want["mapped"]:
            wrong("copied: Numba does not know which items the kernel reads: it copies the WHOLE pool")
        wrong(f"copied: {copied:,} bytes; the pool is {pool_items:,} x {item_size_bytes} bytes, copied both ways")
    if needed != want["mapped"]:
        if needed == 2 * want["mapped"]:
            wrong("needed: the kernel only reads the missed items; nothing is copied back")
        wrong(f"needed: {needed:,} bytes; a mapped pool is read in place: only the {misses} missed items "
              "cross PCIe")
    return report(True, f"{want['pageable']:,} bytes copied per launch for {want['mapped']:,} bytes used "
                  f"({want['pageable'] // want['mapped']:,}x)", "")


def draw_transfers(pool_items: int, item_size_bytes: int, misses: int) -> None:
    """Bytes over PCIe per launch: pageable pool (copied in and out) vs mapped pool (read in place),
    log scale."""
    want = bytes_per_launch(pool_items * item_size_bytes, misses, item_size_bytes)
    fig, (ax,) = figure(7, 1.6)
    ax.barh(["pageable (NumPy) pool", "mapped pinned pool"], [want["pageable"], want["mapped"]],
            color=["#e8604c", "#7ccf7c"])
    ax.set_xscale("log")
    for y, v in enumerate((want["pageable"], want["mapped"])):
        ax.text(v, y, f" {v:,} B", va="center", fontsize=8)
    ax.set_xlabel(f"bytes over PCIe per launch ({pool_items:,} items of {item_size_bytes} B, {misses} misses)")
    ax.invert_yaxis()
    show(fig)
