"""Compile every kernel for the GPU without a GPU: ``python -m hisparse_numba.compile_check``.

Run with ``HISPARSE_NUMBA_BACKEND=compile-only``. Each kernel family's ``compile_examples()``
calls its launchers once on small valid inputs; ``device.launch`` compiles each kernel to PTX for
sm_90 instead of running it. This catches what the CUDA simulator never checks: typing errors,
shared-array sizes that are not compile-time constants, float64 that sneaked into integer code.
"""

from __future__ import annotations

import importlib
import sys

import numpy as np

from . import device

FAMILIES = (
    "hisparse_numba.hisparse.examples",
    "hisparse_numba.hisparse.spec_examples",
    "hisparse_numba.kv_canary.examples",
)


def compile_gather() -> None:
    from .hisparse.gather import gather_to_hot_buffer

    host = device.host_cache_array((8, 32), np.uint8)
    gather_to_hot_buffer(host_cache=host, device_buffer=np.zeros((8, 32), np.uint8),
                         src_locs=np.arange(4, dtype=np.int64), dst_locs=np.arange(4, dtype=np.int64),
                         item_size_bytes=32)


def main() -> int:
    if not device.COMPILE_ONLY:
        raise SystemExit("run with HISPARSE_NUMBA_BACKEND=compile-only")
    compile_gather()
    for name in FAMILIES:
        importlib.import_module(name).compile_examples()
        print(f"{name}: ok", flush=True)
    kernels = sorted({fn.__qualname__ for fn, _ in device.compiled_signatures})
    print(f"compiled {len(device.compiled_signatures)} kernel specialisations to PTX for "
          f"sm_{device.COMPILE_TARGET_CC[0]}{device.COMPILE_TARGET_CC[1]}: {', '.join(kernels)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
