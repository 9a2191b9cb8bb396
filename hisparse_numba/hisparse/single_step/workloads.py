"""Test-only workloads of the single-step family: the fuzz's sizes, and the kernels they compile.

The fuzz (``test_fuzz_single_step.py``) draws (K, H) from ``SIZES`` and block sizes from ``BLOCKS``.
Each (K, H, block size, record_plan, skip_io) is a compile-time configuration of the swap-in
kernel, and each index dtype another argument-type specialisation of it: 80 on a GPU, a few
seconds of compile each. ``hisparse-numba warmup --tests`` compiles them in parallel, one task per
part of the (size, block size) pairs (:func:`compile_fuzz_configurations`), so the fuzz finds
them in the kernel cache; ``test_warmup_covers_the_fuzz`` proves that they are all there.
"""

from hisparse_numba import device

ON_GPU = device.backend() == "cuda"
SIZES = ([(8, 16), (5, 12), (64, 128), (256, 300), (2048, 4096)] if ON_GPU
         else [(8, 16), (5, 12), (4, 4), (40, 72)])  # (40, 72): threads judge 2 lanes, 3 slots
BLOCKS = (256, 1024) if ON_GPU else (32, 64)


def compile_fuzz_configurations(part: int, parts: int) -> None:
    """Launch every specialisation the fuzz can draw at part ``part`` of ``parts`` of its
    (size, block size) pairs: the swap-in (both plan modes, both ``skip_io``, both index dtypes),
    its value check, and the replay of its plan."""
    from hisparse_numba import warmup

    pairs = [(K, H, block) for K, H in SIZES for block in BLOCKS]
    for K, H, block in pairs[part::parts]:
        for record_plan in (True, False):
            for index_dtype in ("int32", "int64"):
                warmup.single_step(K, H, record_plan, batch=2, block_size=block, index_dtype=index_dtype,
                                   skip_io=(False, True), replay=True)
