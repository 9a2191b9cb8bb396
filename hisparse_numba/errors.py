"""The error catalogue: every error hisparse-numba raises, its cause, its fix and its lesson.

``pattern`` is the message as raised, with ``{name}`` for the parts that vary; ``explain``
turns a pasted message back into its entry. Tests check that every ``fail(...)``/``raise``
site in the package has an entry and every entry names a lesson that exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    pattern: str
    cause: str
    fix: str
    lesson: str
    origin: str = "sglang"  # "sglang" when the text is sglang's own, else "hisparse-numba"

    def regex(self) -> re.Pattern:
        parts = re.split(r"\{[a-z_]+\}", self.pattern)
        return re.compile(".+?".join(re.escape(p) for p in parts), re.DOTALL)

    def render(self) -> str:
        return (f"{self.pattern}\n  raised by: {self.origin}\n  cause: {self.cause}\n"
                f"  fix: {self.fix}\n  lesson: {self.lesson} (hisparse-numba lessons run {self.lesson})")


CATALOGUE: list[Entry] = [
    Entry(
        "speculative miss_src/miss_dst must have shape [batch, >= steps * top_k] (capacity {plan_capacity}).",
        "The miss plan has fewer than steps * top_k columns, fewer rows than the batch (padding rows "
        "included) or is not 2-D. In the worst case every occurrence of every step is a distinct miss.",
        "Allocate the plan with alloc_miss_plan(batch, steps, top_k) (miss_plan_capacity columns) and "
        "slice rows to the padded batch.",
        "01",
    ),
    Entry(
        "kv-canary: launch_canary_plan_kernels{variant} verify_capacity={verify_capacity} does not match "
        "verify_plan_out.verify_slot_indices.shape[0]={plan_verify_capacity}",
        "verify_capacity was computed separately from the size the VerifyPlan was allocated with.",
        "Derive both from one expression, or pass int(plan.verify_slot_indices.shape[0]).",
        "02",
    ),
]


def explain(message: str) -> list[Entry]:
    """Entries whose pattern matches ``message`` (a pasted message, possibly with a prefix)."""
    message = message.strip()
    return [e for e in CATALOGUE if e.regex().search(message)]


def entries_for_lesson(lesson_id: str) -> list[Entry]:
    return [e for e in CATALOGUE if e.lesson == lesson_id]
