"""kv-canary: sidecar canary rows that detect KV-cache corruption (plan -> write -> verify).

Read in this order: ``hashing`` (the chain), ``plan`` (which slots to verify and where to write),
``write`` (stamp rows), ``verify`` (check rows), ``context`` (real-KV folding and the violation
ring). Each launcher is ``check_canary_<kernel>(...)`` (the accepted call: ``plan_checks``,
``write_checks``, ``verify_checks``, each with its one-pass device value check and that check's
NumPy twin; ``arguments`` for the Python-type checks) then its module's ``launch_unchecked(call)``.
The behaviour: ``docs/kv-canary-behaviour.md``.
"""

from .context import RealKvSource, VerifyOrWriteContext
from .hashing import (
    CANARY_CHAIN_ANCHOR,
    CANARY_FIELD_POSITION,
    CANARY_FIELD_PREV_HASH,
    CANARY_FIELD_REAL_KV_HASH,
    CANARY_FIELD_TOKEN,
    CANARY_FIELDS_PER_SLOT,
    CANARY_SLOT_BYTES,
    CHAIN_HEAD_HASH,
    MAX_REAL_KV_SOURCES,
    REQ_POOL_IDX_PADDING,
    TOKEN_TO_KV_SLOT_PADDING,
    VIOLATION_FIELDS,
    CanaryLaunchTag,
    FailReason,
    RealKvHashMode,
    chain_hashes,
    mix3,
    splitmix64,
    to_signed64,
)
from .plan import launch_canary_plan_kernels, launch_canary_plan_kernels_reference
from .plan_types import VerifyPlan, WritePlan
from .plan_checks import PLAN_BS_BLOCK_SIZE, CanaryPlanCall, check_canary_plan
from .verify import (
    CanaryVerifyCall,
    check_canary_verify,
    launch_canary_verify_kernel,
    launch_canary_verify_kernel_reference,
)
from .write import (
    CanaryWriteCall,
    check_canary_write,
    launch_canary_write_kernel,
    launch_canary_write_kernel_reference,
)

__all__ = [
    "CANARY_CHAIN_ANCHOR", "CANARY_FIELD_POSITION", "CANARY_FIELD_PREV_HASH", "CANARY_FIELD_REAL_KV_HASH",
    "CANARY_FIELD_TOKEN", "CANARY_FIELDS_PER_SLOT", "CANARY_SLOT_BYTES", "CHAIN_HEAD_HASH",
    "MAX_REAL_KV_SOURCES", "PLAN_BS_BLOCK_SIZE", "CanaryPlanCall", "CanaryVerifyCall", "CanaryWriteCall",
    "check_canary_plan", "check_canary_verify", "check_canary_write", "REQ_POOL_IDX_PADDING", "TOKEN_TO_KV_SLOT_PADDING",
    "VIOLATION_FIELDS", "CanaryLaunchTag", "FailReason", "RealKvHashMode", "RealKvSource", "VerifyOrWriteContext",
    "VerifyPlan", "WritePlan", "chain_hashes", "launch_canary_plan_kernels", "launch_canary_plan_kernels_reference",
    "launch_canary_verify_kernel", "launch_canary_verify_kernel_reference", "launch_canary_write_kernel",
    "launch_canary_write_kernel_reference", "mix3", "splitmix64", "to_signed64",
]
