"""Workloads of the single-step family that warmup compiles: one configuration, and the fuzz's.

:func:`single_step` launches the swap-in of one (K, H, plan) configuration on small valid inputs
(``warmup``'s lesson and test tasks name it); :func:`strided_copy` makes the strided views lessons
pass.

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
    pairs = [(K, H, block) for K, H in SIZES for block in BLOCKS]
    for K, H, block in pairs[part::parts]:
        for record_plan in (True, False):
            for index_dtype in ("int32", "int64"):
                single_step(K, H, record_plan, batch=2, block_size=block, index_dtype=index_dtype,
                            skip_io=(False, True), replay=True)


def strided_copy(a, columns: int | None = None):
    """``a`` (2-D, on the device) copied into a strided view of ``columns`` columns (default: as
    many as ``a``) inside a wider zero-filled array: layout ``A``, every column in bounds. The row
    stride, in elements, is the next multiple of 4 above ``columns`` whatever the dtype: plan arrays
    share one stride, and 4- and 8-byte rows start on 16-byte boundaries (the kernels also read
    int32 rows as int64 words)."""
    xp = device.xp
    columns = a.shape[1] if columns is None else int(columns)
    room = xp.zeros((a.shape[0], (columns // 4 + 1) * 4), dtype=a.dtype)
    room[:, : a.shape[1]] = a
    return room[:, :columns]


def single_step(num_top_k: int = 8, hot_buffer_size: int = 16, record_plan: bool = True, *,
                batch: int = 3, block_size: int = 32, index_dtype: str = "int32", skip_io=(False,),
                strided_plan: bool = False, replay: bool = False,
                unchecked_hot: int | None = None, rungs=None) -> None:
    """The single-step swap-in of one (K, H, plan) configuration, for each ``skip_io`` and each rung
    of the kernel ladder in ``rungs`` (None: every rung whose shared memory fits); with
    ``strided_plan`` the plan arrays are strided views; with ``replay`` the planned copy replays
    the recorded plan into another layer, both ``skip_io`` values. ``unchecked_hot`` launches the
    checked call again, unchecked, with a smaller hot buffer size (lesson 09's H < K, which the
    checks reject; the arrays stay sized for ``hot_buffer_size``, so it stays in bounds)."""
    import numpy as np

    from . import (check_swap_in, launch_unchecked, load_cache_to_device_buffer_mla,
                   load_cache_to_device_buffer_mla_reference, versions)
    from .examples import make_swap_in_problem, planned_copy_args, to_device_problem
    from .launch import STATIC_SHARED_LIMIT
    from .planned_copy import copy_cache_planned_mla

    if rungs is None:
        rungs = [n for n in versions.VERSIONS if versions.module(n).shared_memory_bytes(
            num_top_k, hot_buffer_size, block_size) <= STATIC_SHARED_LIMIT]

    rng = np.random.default_rng(0)
    for skip in skip_io:
        p = make_swap_in_problem(rng, batch=batch, num_top_k=num_top_k, hot_buffer_size=hot_buffer_size,
                                 record_plan=record_plan, index_dtype=np.dtype(index_dtype).type,
                                 num_real=max(batch - 1, 1), block_size=block_size)
        p["skip_io"] = skip
        d = to_device_problem(p)
        if strided_plan:
            d["miss_src"], d["miss_dst"] = strided_copy(d["miss_src"]), strided_copy(d["miss_dst"])
        if unchecked_hot is None:
            for version in rungs:       # each rung writes the same state: launching again is fine
                load_cache_to_device_buffer_mla(**d, version=version)
        else:
            call = check_swap_in(**d)
            launch_unchecked(call._replace(hot_buffer_size=unchecked_hot), version=versions.DEFAULT)
        if replay and record_plan and not skip:
            load_cache_to_device_buffer_mla_reference(**p)
            d = to_device_problem(p)
            if strided_plan:
                d["miss_src"], d["miss_dst"] = strided_copy(d["miss_src"]), strided_copy(d["miss_dst"])
            layer = device.to_device(p["device_buffer"])
            for replay_skip in (False, True):
                copy_cache_planned_mla(**planned_copy_args(d, layer, skip_io=replay_skip))
