"""The two plans the plan launchers fill and the write and verify launchers read.

``VerifyPlan``: four ``[C]`` int64 entry arrays and two ``[1]`` int32 scalars; ``WritePlan``:
``write_offsets [R + 1]`` int64, ``write_seed_slot_indices [R]`` int64 and
``write_num_valid_reqs [1]`` int32 (``docs/kv-canary-behaviour.md#plan``). ``plan`` fills them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import CANARY_PREFIX, check_int, fail
from ..device import xp


@dataclass(frozen=True)
class VerifyPlan:
    """Flat verify entries: four ``[C]`` int64 arrays and two ``[1]`` int32 scalars.

    ``verify_prev_slot_indices == -1`` marks a chain head, ``verify_expected_tokens == -1`` skips the
    token check. Entries at index ``>= verify_num_valid[0]`` are unspecified.
    """

    verify_slot_indices: object
    verify_expected_tokens: object
    verify_expected_positions: object
    verify_prev_slot_indices: object
    verify_num_valid: object
    enable: object

    @staticmethod
    def allocation_bytes(verify_capacity: int) -> int:
        return 4 * int(verify_capacity) * 8 + 2 * 4

    @classmethod
    def allocate(cls, verify_capacity: int, *, array_module=None) -> "VerifyPlan":
        """Device arrays for ``verify_capacity`` entries (entries uninitialised, ``verify_num_valid``
        = 0 and ``enable`` = 1: a verify launch on a fresh plan checks nothing).

        ``array_module=numpy`` allocates host arrays (for the NumPy reference on a GPU machine).
        """
        am = xp if array_module is None else array_module
        verify_capacity = check_int("verify_capacity", verify_capacity, prefix=CANARY_PREFIX)
        if verify_capacity <= 0:
            fail(f"kv-canary: VerifyPlan verify_capacity must be positive, got {verify_capacity}")
        return cls(
            verify_slot_indices=am.empty(verify_capacity, dtype=np.int64),
            verify_expected_tokens=am.empty(verify_capacity, dtype=np.int64),
            verify_expected_positions=am.empty(verify_capacity, dtype=np.int64),
            verify_prev_slot_indices=am.empty(verify_capacity, dtype=np.int64),
            verify_num_valid=am.zeros(1, dtype=np.int32),
            enable=am.ones(1, dtype=np.int32),
        )

    def arrays(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class WritePlan:
    """``write_offsets [R + 1]`` int64, ``write_seed_slot_indices [R]`` int64,
    ``write_num_valid_reqs [1]`` int32. Row ``r`` writes flat entries
    ``[write_offsets[r], write_offsets[r + 1])`` of ``input_ids/positions/out_cache_loc``."""

    write_offsets: object
    write_seed_slot_indices: object
    write_num_valid_reqs: object

    @staticmethod
    def allocation_bytes(write_req_capacity: int) -> int:
        return (2 * int(write_req_capacity) + 1) * 8 + 4

    @classmethod
    def allocate(cls, write_req_capacity: int, *, array_module=None) -> "WritePlan":
        """Device arrays for ``write_req_capacity`` rows (uninitialised but ``write_num_valid_reqs``
        = 0: a write launch on a fresh plan writes nothing); see ``VerifyPlan.allocate``."""
        am = xp if array_module is None else array_module
        write_req_capacity = check_int("write_req_capacity", write_req_capacity, prefix=CANARY_PREFIX)
        if write_req_capacity <= 0:
            fail(f"kv-canary: WritePlan write_req_capacity must be positive, got {write_req_capacity}")
        return cls(
            write_offsets=am.empty(write_req_capacity + 1, dtype=np.int64),
            write_seed_slot_indices=am.empty(write_req_capacity, dtype=np.int64),
            write_num_valid_reqs=am.zeros(1, dtype=np.int32),
        )

    def arrays(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
