"""Lesson 01 exercise checker: size the speculative miss plan for a CUDA-graph padded batch.

The exercise: a server warmed up at batch 2 and allocated its plan then. Later the CUDA graph is
captured for a padded batch (``padded_batch`` rows, of which ``real_batch`` are real requests).
Write ``plan_for(padded_batch, real_batch, num_steps, num_top_k)`` returning
``(miss_src, miss_dst, miss_count)`` that the speculative launcher accepts for that batch.
"""

from __future__ import annotations

import numpy as np

from ..hisparse.miss_plan import alloc_miss_plan, miss_plan_capacity
from ..hisparse.speculative import COUNT_MESSAGE, plan_shape_message
from ..checks import check_miss_plan

CASES = [(8, 5, 4, 2048), (16, 16, 3, 1024), (4, 1, 2, 64), (64, 33, 4, 2048)]


def solution(padded_batch, real_batch, num_steps, num_top_k):
    """Rows for every *padded* row (the kernel writes ``miss_count`` = 0 there), and
    ``steps * top_k`` columns (every occurrence may be a distinct miss)."""
    return alloc_miss_plan(padded_batch, num_steps, num_top_k)


def check(plan_for) -> bool:
    """Print ``right`` or ``wrong: <why>`` for the learner's ``plan_for``; return whether right."""
    for padded, real, steps, top_k in CASES:
        try:
            plan = plan_for(padded, real, steps, top_k)
            src, dst, cnt = plan
            cap = miss_plan_capacity(steps, top_k)
            check_miss_plan(src, dst, cnt, batch=padded, capacity=cap,
                            shape_message=plan_shape_message(cap), count_message=COUNT_MESSAGE)
        except ValueError as e:
            print(f"wrong: for padded batch {padded} (real {real}), steps {steps}, top_k {top_k} "
                  f"the launcher would say: {e}")
            return False
        except Exception as e:  # noqa: BLE001 - any mistake is reported, not raised
            print(f"wrong: plan_for{(padded, real, steps, top_k)} raised {type(e).__name__}: {e}")
            return False
        if np.asarray(src.shape).prod() > 4 * padded * cap:
            print(f"wrong: the plan for batch {padded} is much larger than it needs to be")
            return False
    print("right")
    return True
