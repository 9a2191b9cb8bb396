"""Lesson 09 (hot_buffer_size >= num_top_k): the damage an overfull step does, the checker of the
prediction of where the misses go, and the lesson's figure. Lesson 00 predicts the misses too,
with the same ``common.miss_slots_and_lru``."""

from __future__ import annotations

import numpy as np

from .common import Verdict, checker, figure, is_unanswered, miss_slots_and_lru, show, whole_numbers, wrong


def overfull_step(problem: dict, leftover_slots) -> dict:
    """What the swap-in kernel does with a step whose misses outnumber the hot slots (a call the
    launcher rejects: ``hot_buffer_size < num_top_k``), on a host copy of ``problem``: one request,
    every selected position a miss. Returns the copy after the step.

    The kernel writes the evictable slots, least recently used first, into a shared-memory list
    of ``num_top_k`` entries, and the m-th miss (lane order) takes entry m. Past the
    ``hot_buffer_size`` written entries the list holds whatever that shared memory held before
    the block ran: ``leftover_slots`` (``num_top_k - hot_buffer_size`` slot numbers) says what,
    so that the step is the same in every run, in the simulator and on a GPU. Each miss points
    its lane at its slot's device row, tags the slot, records its plan entry and copies its host
    item into the row; of misses that share a row, the last in lane order is the copy kept here
    (on a GPU the racing copies land in no defined order). ``lru_slots`` is left as it was.
    """
    p = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in problem.items()}
    H, K, item = p["hot_buffer_size"], p["num_top_k"], p["item_size_bytes"]
    rid, tokens = int(p["req_pool_indices"][0]), p["top_k_tokens"][0, :K]
    tags, locs = p["device_buffer_tokens"][rid], p["device_buffer_locs"][rid]
    if p["top_k_tokens"].shape[0] != 1 or np.isin(tokens, tags[:H]).any() or (tokens == p["seq_lens"][0] - 1).any():
        raise ValueError("overfull_step takes one request whose selected positions are all misses")
    leftover = [int(s) for s in leftover_slots]
    if len(leftover) != K - H or not all(0 <= s < H for s in leftover):
        raise ValueError(f"leftover_slots must be {K - H} slot numbers in [0, {H}), got {leftover}")
    slots = np.concatenate([p["lru_slots"][rid, :H].astype(np.int64), leftover])
    rows, src = locs[slots], p["host_cache_locs"][rid, tokens]
    p["top_k_device_locs"][0, :K] = rows
    host_items = p["host_cache"].view(np.uint8).reshape(-1, item)
    device_items = p["device_buffer"].view(np.uint8).reshape(-1, item)
    for lane in range(K):
        tags[slots[lane]] = tokens[lane]
        device_items[rows[lane]] = host_items[src[lane]]
    if p.get("miss_count") is not None:
        p["miss_src"][0, :K], p["miss_dst"][0, :K], p["miss_count"][0] = src, rows, K
    return p


@checker
def check(problem: dict, miss_slots, lru_after) -> bool:
    """Print right, wrong or not yet for a prediction of the misses' slots and the new LRU order."""
    if is_unanswered(miss_slots) or is_unanswered(lru_after):
        raise Verdict("not yet", "replace ... with your prediction")
    miss_slots = whole_numbers(miss_slots, "miss_slots", "slot numbers")
    lru_after = whole_numbers(lru_after, "lru_after", "slot numbers")
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
