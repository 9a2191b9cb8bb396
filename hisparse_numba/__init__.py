"""hisparse-numba: sglang's HiSparse and kv-canary KV-cache kernels in Numba CUDA.

Every kernel sits beside the NumPy reference it must match exactly. ``device`` picks the world
(a CUDA GPU, or Numba's CUDA simulator on a CPU); ``hisparse`` holds the swap-in kernels and
``kv_canary`` the corruption guard. Importing this package imports Numba (and CuPy on a GPU).
"""

__version__ = "0.1.0"

from . import device  # noqa: E402  (chooses the backend before anything imports numba.cuda)
from .hisparse import *  # noqa: E402,F401,F403
from .hisparse import __all__ as _hisparse_all  # noqa: E402
from .kv_canary import (  # noqa: E402
    CANARY_CHAIN_ANCHOR,
    VerifyPlan,
    WritePlan,
    launch_canary_plan_kernels,
    launch_canary_plan_kernels_reference,
    launch_canary_verify_kernel,
    launch_canary_verify_kernel_reference,
    launch_canary_write_kernel,
    launch_canary_write_kernel_reference,
    mix3,
    splitmix64,
)

__all__ = ["device", *_hisparse_all, "CANARY_CHAIN_ANCHOR", "VerifyPlan", "WritePlan",
           "launch_canary_plan_kernels", "launch_canary_plan_kernels_reference",
           "launch_canary_verify_kernel", "launch_canary_verify_kernel_reference",
           "launch_canary_write_kernel", "launch_canary_write_kernel_reference", "mix3", "splitmix64"]
