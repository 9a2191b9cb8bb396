"""The checks of the kv-canary verify launcher (``verify.py``), run before anything is written.

Host checks: the context (``context.check_context``), the flag, the VerifyPlan's types, dtypes and
shapes, and that no plan array shares memory with an array the kernel writes. Then, with
``checks="full"`` (the default), ONE device pass over the entries the kernel reads
(``k < min(max(verify_num_valid, 0), C)``, only when ``enable != 0``; ``docs/kv-canary-behaviour.md#verify``)
checks, for entries whose slot is not 0 (slot 0 is skipped):

0. ``-num_slots <= slot < num_slots`` (a negative slot counts from the end of the buffer, as in
   sglang's reference);
1. a positive predecessor ``prev`` is ``< num_slots`` (0 and negative predecessors are not read).

Verify never writes the canary buffer, so repeated slots are harmless.
``verify_value_verdict_reference`` is the NumPy twin of the kernel's verdict.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import device, value_flags
from ..checks import (CANARY_PREFIX, check_array, check_flag, check_mode, check_values, describe,
                      element_at, fail, raise_first, remember_host_checks, settle)
from ..device import cuda
from ..value_flags import finish_check_dev, flag_bad_dev
from .context import VerifyOrWriteContext, check_context, check_launch_memory, check_plan_arrays
from .plan_types import VerifyPlan


class CanaryVerifyCall(NamedTuple):
    """One accepted verify launch: every argument of the call (see ``verify.launch_unchecked``)."""

    context: VerifyOrWriteContext
    plan: VerifyPlan
    check_verify_expected_token: bool
    gate: object = None        # the value check's flags (value_flags.start_check); None: always open
    pending: object = None     # that check's value_flags.ValueCheck until the launcher settles it


PLAN_ARRAYS = ("verify_slot_indices", "verify_expected_tokens", "verify_expected_positions",
               "verify_prev_slot_indices")


@remember_host_checks()
def canary_verify_host_checks(*, context, plan, check_verify_expected_token) -> CanaryVerifyCall:
    """The host part of :func:`check_canary_verify` (types, shapes, dtypes, layouts, scalars; no value
    inside an array), remembered for repeated calls on the same buffers."""
    check_context(context)
    check_token = check_flag("check_verify_expected_token", check_verify_expected_token, prefix=CANARY_PREFIX)
    cap = check_plan_arrays(plan, VerifyPlan, "verify_slot_indices",
                            type_message=f"kv-canary: plan must be a VerifyPlan, got {type(plan).__name__}")
    for name in PLAN_ARRAYS:
        if tuple(getattr(plan, name).shape) != (cap,):
            fail(f"kv-canary: plan.{name} must have shape ({cap},) (the length of plan.verify_slot_indices), "
                 f"got {describe(getattr(plan, name))}")
        check_array(f"plan.{name}", getattr(plan, name), np.int64, shape=(cap,), prefix=CANARY_PREFIX)
    check_array("plan.verify_num_valid", plan.verify_num_valid, np.int32, shape=(1,), prefix=CANARY_PREFIX)
    check_array("plan.enable", plan.enable, np.int32, shape=(1,), prefix=CANARY_PREFIX)
    check_launch_memory(context, {f"plan.{k}": v for k, v in plan.arrays().items()})
    call = CanaryVerifyCall(context=context, plan=plan, check_verify_expected_token=check_token)
    return call


def check_canary_verify(*, context, plan, check_verify_expected_token, checks: str = "full",
                        on_device: bool = True, defer: bool = False) -> CanaryVerifyCall:
    """Every check of the verify launcher and its reference; the accepted call.
    ``checks="shapes"`` skips the value checks; ``on_device=False`` runs them in NumPy."""
    values = check_mode(checks, prefix=CANARY_PREFIX)
    call = canary_verify_host_checks(
        context=context, plan=plan, check_verify_expected_token=check_verify_expected_token)
    if values:
        call = check_verify_values(call, on_device=on_device, defer=defer)
    return call


# ---------------------------------------------------------------------------------------------
# The value checks: NumPy reference, then the kernel, then the runner.

SLOT_OUT_OF_RANGE, PREV_PAST_BUFFER = range(2)


def verify_value_verdict_reference(slots, prev_slots, num_valid, enable, num_slots: int) -> list:
    """``[(count, first bad entry), ...]`` per condition of the module docstring (NumPy)."""
    verdict = [(0, -1)] * value_flags.CHECK_CONDITIONS
    if int(np.asarray(enable)[0]) == 0:
        return verdict
    active = min(max(int(np.asarray(num_valid)[0]), 0), slots.shape[0])
    slot = np.asarray(slots[:active], dtype=np.int64)
    prev = np.asarray(prev_slots[:active], dtype=np.int64)
    read = slot != 0
    bad = [read & ((slot < -num_slots) | (slot >= num_slots)), read & (prev >= num_slots)]
    verdict[:2] = [(int(b.sum()), int(np.argmax(b)) if b.any() else -1) for b in bad]
    return verdict


@cuda.jit(device=True, inline=True)
def verify_value_check_dev(slots, prev_slots, num_valid, enable, num_slots, flags):
    if enable[0] == 0:
        return
    active = min(max(np.int64(num_valid[0]), 0), slots.shape[0])
    k = cuda.grid(1)
    while k < active:
        slot = slots[k]
        prev = prev_slots[k]        # both loads before any branch: they are in flight together
        if slot != 0:
            if slot < -num_slots or slot >= num_slots:
                flag_bad_dev(flags, SLOT_OUT_OF_RANGE, k)
            if prev >= num_slots:
                flag_bad_dev(flags, PREV_PAST_BUFFER, k)
        k += cuda.gridsize(1)


@cuda.jit
def verify_value_check_kernel(slots, prev_slots, num_valid, enable, num_slots, flags, verdict):
    verify_value_check_dev(slots, prev_slots, num_valid, enable, num_slots, flags)
    finish_check_dev(flags, verdict)


def _entries_geometry(capacity: int) -> tuple[int, int]:
    """Up to 512 blocks of 512 threads: at 1M entries each thread judges 4 (the pass is bound by
    the latency of its loads, so more of them in flight is what makes it shorter)."""
    threads = 32 if device.SIMULATOR else 512
    max_blocks = 2 if device.SIMULATOR else 512
    return max(1, min(max_blocks, -(-capacity // threads))), threads


def _value_args(call: CanaryVerifyCall) -> tuple:
    """The check kernel's arguments: the plan's slot lists, its valid count and enable flag, and
    the number of canary slots."""
    p = call.plan
    num_slots = int(call.context.canary_buf.shape[0])
    return p.verify_slot_indices, p.verify_prev_slot_indices, p.verify_num_valid, p.enable, num_slots


def check_verify_values(call: CanaryVerifyCall, *, on_device: bool = True,
                        defer: bool = False) -> CanaryVerifyCall:
    """The slot-range checks of the module docstring, as ``checks.check_values`` runs them
    (``defer``: :func:`settle_canary_verify` raises later)."""
    args = _value_args(call)
    geometry = _entries_geometry(int(call.plan.verify_slot_indices.shape[0]))
    return check_values(call, raise_verify_flags, on_device=on_device, defer=defer,
                        reference=lambda: verify_value_verdict_reference(*args),
                        start=lambda: value_flags.start_check(verify_value_check_kernel, *geometry, *args))


def settle_canary_verify(call: CanaryVerifyCall) -> CanaryVerifyCall:
    """Wait for ``call``'s value check: raise its ``ValueError`` or return the settled call."""
    return settle(call, raise_verify_flags)


def raise_verify_flags(verdict, call: CanaryVerifyCall) -> None:
    """The ``ValueError`` of the first failed condition of a verify call's verdict (none: returns)."""
    plan = call.plan
    num_slots = int(call.context.canary_buf.shape[0])

    raise_first(verdict, [   # one message per condition, given the first bad entry k
        lambda k: (f"kv-canary: plan.verify_slot_indices[{k}]={element_at(plan.verify_slot_indices, k)} is outside "
                   f"canary_buf's slots [-{num_slots}, {num_slots}) (a negative slot counts from the end; "
                   f"entries below plan.verify_num_valid[0]={element_at(plan.verify_num_valid, 0)} are read)"),
        lambda k: (f"kv-canary: plan.verify_prev_slot_indices[{k}]={element_at(plan.verify_prev_slot_indices, k)} "
                   f"is past canary_buf's {num_slots} slots (entries below plan.verify_num_valid[0]="
                   f"{element_at(plan.verify_num_valid, 0)} are read)"),
    ])
