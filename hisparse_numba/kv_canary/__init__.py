"""kv-canary: sidecar canary rows that detect KV-cache corruption (plan -> write -> verify).

Files, in reading order (each kernel module holds its NumPy reference first, then the kernel,
then ``launch_unchecked(call)`` and the launcher):

* ``hashing.py``: the hash chain, in NumPy and as device functions;
* ``plan_types.py``: ``VerifyPlan`` and ``WritePlan``, the plans' buffers;
* ``plan_checks.py``, ``plan.py``: which slots to verify and where to write
  (``launch_canary_plan_kernels``);
* ``context.py``: ``VerifyOrWriteContext``, the canary buffer, real-KV folding and the violation ring;
* ``write_checks.py``, ``write.py``: stamp canary rows (``launch_canary_write_kernel``);
* ``verify_checks.py``, ``verify.py``: check canary rows (``launch_canary_verify_kernel``);
* ``examples.py``: valid problems for tests, benchmarks and lessons, and ``compile_examples``.

Each launcher is ``check_canary_<kernel>(..., defer=True)`` (host checks with
``hisparse_numba/arguments.py`` and ``checks.py``; the device value pass enqueued; the plan runs
its pass inside its first kernel), then the gated ``launch_unchecked(call)``, then the verdict.
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
