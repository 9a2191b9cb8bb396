"""Lesson 10 (16-byte items and base addresses): the checkers and the lesson's figure."""

from __future__ import annotations

import numpy as np

from .common import (Verdict, checker, draw_grid, figure, is_unanswered, learner_answer, report, show,
                     whole_numbers, wrong)

CASES = [1, 8, 15, 16, 17, 32, 584, 576, 1152, 656, 37440]


@checker
def check_pad(pad) -> bool:
    """Exercise 10-a: ``pad(nbytes)`` must return the smallest multiple of 16 that is >= nbytes."""
    for n in CASES:
        want = -(-n // 16) * 16
        got = learner_answer(pad, n)
        if not isinstance(got, (int, np.integer)):
            wrong(f"pad({n}) returned {got!r}, a {type(got).__name__}: sizes are whole bytes (use //, not /)")
        if got != want:
            if got == n + 16 and n % 16 == 0:
                hint = "a size that is already a multiple of 16 needs no padding"
            elif got == n // 16 * 16:
                hint = "rounded down: the item would lose bytes"
            elif got % 16:
                hint = f"{got} is not a multiple of 16"
            else:
                hint = f"{want} is smaller"
            wrong(f"pad({n}) = {got}; expected {want}, the smallest multiple of 16 >= {n} ({hint})")
    return report(True, f"pad gives 16-byte multiples for all of {CASES} (584 -> 592)", "")


@checker
def check_aligned_offsets(offsets, item_size_bytes: int, count: int = 8) -> bool:
    """Exercise 10-b: ``offsets`` lists the items ``0..count-1`` whose byte offset is 16-aligned."""
    want = [i for i in range(count) if (i * item_size_bytes) % 16 == 0]
    if is_unanswered(offsets):
        raise Verdict("not yet", "replace ... with a list of item numbers")
    got = sorted(whole_numbers(offsets, "aligned_items", "item numbers"))
    extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
    if extra:
        i = extra[0]
        wrong(f"item {i} starts at byte {i} * {item_size_bytes} = {i * item_size_bytes}, and "
              f"{i * item_size_bytes} % 16 = {i * item_size_bytes % 16}: not on a 16-byte boundary")
    if missing:
        i = missing[0]
        wrong(f"item {i} starts at byte {i * item_size_bytes}, a multiple of 16: it is aligned too")
    return report(True, f"with {item_size_bytes}-byte items, items {want} start on a 16-byte boundary", "")


def draw_chunks(item_size_bytes: int, items: int = 4) -> None:
    """The 16-byte chunk grid under ``items`` consecutive items: chunk boundaries every 16 bytes,
    items coloured alternately, chunks that straddle two items in red."""
    total = items * item_size_bytes
    chunks = -(-total // 16)
    owner = np.minimum(np.arange(chunks) * 16 // item_size_bytes, items - 1)
    last = np.minimum((np.arange(chunks) * 16 + 15) // item_size_bytes, items - 1)
    colors = np.where(owner != last, 2, 1 + 2 * (owner % 2))
    per_row = 37 if item_size_bytes % 16 else item_size_bytes // 16
    rows = -(-chunks // per_row)
    grid = np.full(rows * per_row, -1)
    grid[:chunks] = owner
    cgrid = np.zeros(rows * per_row, int)
    cgrid[:chunks] = colors
    fig, (ax,) = figure(9, 0.45 * rows + 1.2)
    draw_grid(ax, grid.reshape(rows, per_row), colors=cgrid.reshape(rows, per_row), annotate=per_row <= 40,
              row_labels=[f"byte {r * per_row * 16}" for r in range(rows)],
              title=f"16-byte chunks of {items} items of {item_size_bytes} bytes (number: the item; "
                    "red: a chunk shared by two items)")
    show(fig)
