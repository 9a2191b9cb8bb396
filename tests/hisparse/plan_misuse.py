"""Misuse of a miss plan that every launcher taking one rejects, with sglang's texts."""

import re

import numpy as np


def plan_misuse(dropped: str, shape_message: str) -> list:
    """``(name, mutate, message)`` cases: a partial plan (``dropped`` left out), wrong dtypes, and a
    1-D plan, which the launcher reports with its own ``shape_message``."""
    return [
        ("partial plan", lambda p: p.update({dropped: None}),
         re.escape("miss_src, miss_dst, and miss_count must be provided together.")),
        ("miss_dst int64", lambda p: p.update(miss_dst=p["miss_dst"].astype(np.int64)),
         re.escape("miss_src must be int64 and miss_dst must be int32.")),
        ("miss_count int64", lambda p: p.update(miss_count=p["miss_count"].astype(np.int64)),
         re.escape("miss_count must be int32.")),
        ("1-D plan", lambda p: p.update(miss_src=p["miss_src"].reshape(-1), miss_dst=p["miss_dst"].reshape(-1)),
         re.escape(shape_message)),
    ]
