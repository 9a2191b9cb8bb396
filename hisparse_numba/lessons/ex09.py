"""Lesson 09 (hot_buffer_size >= num_top_k): predict where the misses go (checker) and the lesson's
figure. Lesson 00 predicts the misses too, with the same ``common.miss_slots_and_lru``."""

from __future__ import annotations

import numpy as np

from .common import Verdict, checker, figure, miss_slots_and_lru, show, wrong


@checker
def check(problem: dict, miss_slots, lru_after) -> bool:
    """Print right, wrong or not yet for a prediction of the misses' slots and the new LRU order."""
    if miss_slots is ... or lru_after is ...:
        raise Verdict("not yet", "replace ... with your prediction")
    try:
        miss_slots, lru_after = [int(s) for s in miss_slots], [int(s) for s in lru_after]
    except (TypeError, ValueError):
        wrong("miss_slots and lru_after must be lists of slot numbers")
    want_slots, want_lru = miss_slots_and_lru(problem)
    if miss_slots != want_slots:
        wrong(f"the misses do not take slots {miss_slots} (hint: the m-th miss, in lane order, takes the "
              "m-th least recently used slot that holds no selected position)")
    if lru_after != want_lru:
        wrong(f"lru_slots does not become {lru_after} (hint: unused evictable slots first, then the slots "
              "just filled, in miss order, then the hits)")
    print(f"right: the misses take slots {want_slots} and lru_slots becomes {want_lru}")
    return True


def draw_lanes(tokens, rows, row_tokens, title: str = "") -> None:
    """Lanes (the selected tokens) on the left, device rows on the right, one arrow per lane to the
    row it reads; red when several lanes share a row, or when the row holds another token's KV."""
    tokens, rows, row_tokens = (np.asarray(a).reshape(-1) for a in (tokens, rows, row_tokens))
    fig, (ax,) = figure(6, 0.42 * max(len(tokens), len(row_tokens)) + 1)
    shared = {int(r) for r in rows if (rows == r).sum() > 1}
    for lane, (token, row) in enumerate(zip(tokens.tolist(), rows.tolist())):
        bad = row in shared or row_tokens[row] != token
        ax.annotate("", xy=(1, row), xytext=(0, lane),
                    arrowprops=dict(arrowstyle="->", color="#e8604c" if bad else "#4a90d9", lw=1.5))
        ax.text(-0.05, lane, f"lane {lane}: token {token}", ha="right", va="center", fontsize=8)
    for row, held in enumerate(row_tokens.tolist()):
        ax.text(1.05, row, f"row {row}: holds token {held:g}", ha="left", va="center", fontsize=8,
                color="#e8604c" if row in shared else "black")
    ax.set_xlim(-0.9, 1.9)
    ax.set_ylim(max(len(tokens), len(row_tokens)) - 0.5, -0.5)
    ax.axis("off")
    ax.set_title(title or "which device row each lane reads (red: shared or wrong KV)", fontsize=9)
    show(fig)
