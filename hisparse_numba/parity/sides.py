"""The two sides of a parity run: this project's launchers and sglang's, behind one interface.

Both sides take the project's arrays (CuPy on a GPU, the host pool a mapped pinned NumPy array)
and mutate them in place. ``SglangSide`` hands sglang zero-copy torch views of the same memory:
device arrays through DLPack, the host pool as a CPU tensor over the mapped pinned buffer (the
pointer sglang's kernel dereferences is the same one ours does). Nothing is copied, so what
sglang wrote is read back through the project's own arrays.

A side has ``name``, ``swap_in(p)``, ``spec(kw)``, ``canary_plan(vp, wp, inputs, verify_capacity)``,
``canary_verify(ctx, vp, check)``, ``canary_write(ctx, wp, args, expected)`` and
``synchronize()``. Tests substitute a stand-in for ``SglangSide`` with the same methods.
"""

from __future__ import annotations

import importlib

import numpy as np

from .. import device

MIN_SGLANG = (0, 5, 23)


class OursSide:
    """This project's launchers."""

    name = "hisparse-numba"

    def swap_in(self, p: dict) -> None:
        from ..hisparse.single_step import load_cache_to_device_buffer_mla
        load_cache_to_device_buffer_mla(**p)

    def spec(self, kw: dict) -> None:
        from ..hisparse.speculative import load_cache_to_device_buffer_spec_mla
        load_cache_to_device_buffer_spec_mla(**kw)

    def canary_plan(self, vp, wp, inputs: dict, verify_capacity: int) -> None:
        from ..kv_canary import launch_canary_plan_kernels
        launch_canary_plan_kernels(verify_plan_out=vp, write_plan_out=wp,
                                   verify_capacity=verify_capacity, **inputs)

    def canary_verify(self, ctx, vp, check: bool) -> None:
        from ..kv_canary import launch_canary_verify_kernel
        launch_canary_verify_kernel(context=ctx, plan=vp, check_verify_expected_token=check)

    def canary_write(self, ctx, wp, args: dict, expected) -> None:
        from ..kv_canary import launch_canary_write_kernel
        exp = expected or {"expected_input_tokens": None, "expected_input_positions": None}
        launch_canary_write_kernel(context=ctx, plan=wp, enable_write_input_assert=expected is not None,
                                   **exp, **args)

    def synchronize(self) -> None:
        device.synchronize()


def sglang_unavailable_reason() -> str | None:
    """Why sglang's kernels cannot run here, or None when they can."""
    if device.backend() != "cuda":
        return f"needs a CUDA GPU (backend is {device.backend()!r})"
    for mod in ("torch", "tvm_ffi"):
        try:
            importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001 - any import failure is a reason
            return f"cannot import {mod}: {type(e).__name__}: {e}"
    try:
        sg = importlib.import_module("sglang")
    except Exception as e:  # noqa: BLE001
        return f"cannot import sglang: {type(e).__name__}: {e}"
    version = getattr(sg, "__version__", "0")
    parts = tuple(int(x) for x in version.split(".")[:3] if x.isdigit())
    if parts < MIN_SGLANG:
        return f"sglang {version} is older than {'.'.join(map(str, MIN_SGLANG))}"
    for mod in ("sglang.kernels.ops.kvcache.hisparse", "sglang.kernels.ops.kv_canary.plan.api",
                "sglang.kernels.ops.kv_canary.write", "sglang.kernels.ops.kv_canary.verify"):
        try:
            importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001
            return f"cannot import {mod}: {type(e).__name__}: {e}"
    import torch
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


class SglangSide:
    """sglang's own launchers (``sglang.kernels.ops``) on torch views of the project's arrays."""

    name = "sglang"

    def __init__(self):
        import torch
        import sglang
        self.torch = torch
        self.version = sglang.__version__
        self.hisparse = importlib.import_module("sglang.kernels.ops.kvcache.hisparse")
        self.plan_api = importlib.import_module("sglang.kernels.ops.kv_canary.plan.api")
        self.write_mod = importlib.import_module("sglang.kernels.ops.kv_canary.write")
        self.verify_mod = importlib.import_module("sglang.kernels.ops.kv_canary.verify")
        self.consts = importlib.import_module("sglang.kernels.ops.kv_canary.consts")

    def tensor(self, a):
        """A torch view of a project array (no copy); None and scalars pass through."""
        if a is None or isinstance(a, (int, float, bool, np.integer)):
            return a
        if isinstance(a, np.ndarray):        # the mapped pinned host pool (or a host array)
            return self.torch.from_numpy(np.asarray(a))
        return self.torch.from_dlpack(a)

    def swap_in(self, p: dict) -> None:
        kw = {k: self.tensor(v) for k, v in p.items()}
        self.hisparse.load_cache_to_device_buffer_mla(**kw)

    def spec(self, kw: dict) -> None:
        args = {k: self.tensor(v) for k, v in kw.items() if k not in ("state", "item_size_bytes")}
        args["state"] = self.hisparse.HiSparseSpecState(*(self.tensor(a) for a in kw["state"]))
        self.hisparse.load_cache_to_device_buffer_spec_mla(**args)

    def _verify_plan(self, vp):
        return self.verify_mod.VerifyPlan(**{k: self.tensor(a) for k, a in vp.arrays().items()})

    def _write_plan(self, wp):
        return self.write_mod.WritePlan(**{k: self.tensor(a) for k, a in wp.arrays().items()})

    def _context(self, ctx):
        sources = tuple(self.verify_mod.RealKvSource(tensor=self.tensor(s.tensor), page_size=s.page_size,
                                                     num_bytes_per_token=s.num_bytes_per_token,
                                                     read_bytes=s.read_bytes)
                        for s in ctx.real_kv_sources)
        return self.verify_mod.VerifyOrWriteContext(
            canary_buf=self.tensor(ctx.canary_buf),
            kernel_kind=self.verify_mod.CanaryLaunchTag(int(ctx.kernel_kind)),
            violation_ring=self.tensor(ctx.violation_ring),
            violation_write_index=self.tensor(ctx.violation_write_index),
            slot_run_counter=self.tensor(ctx.slot_run_counter),
            kernel_run_counter=self.tensor(ctx.kernel_run_counter),
            real_kv_sources=sources,
            real_kv_hash_mode=self.consts.RealKvHashMode(int(ctx.real_kv_hash_mode)),
            enable_chain_position_assert=self.tensor(ctx.enable_chain_position_assert),
        )

    def canary_plan(self, vp, wp, inputs: dict, verify_capacity: int) -> None:
        v, w = self._verify_plan(vp), self._write_plan(wp)
        self.plan_api.launch_canary_plan_kernels(
            verify_plan_out=v, write_plan_out=w, verify_capacity=verify_capacity,
            **{k: self.tensor(a) for k, a in inputs.items()})

    def canary_verify(self, ctx, vp, check: bool) -> None:
        self.verify_mod.launch_canary_verify_kernel(context=self._context(ctx), plan=self._verify_plan(vp),
                                                    check_verify_expected_token=check)

    def canary_write(self, ctx, wp, args: dict, expected) -> None:
        exp = expected or {"expected_input_tokens": None, "expected_input_positions": None}
        self.write_mod.launch_canary_write_kernel(
            context=self._context(ctx), plan=self._write_plan(wp), enable_write_input_assert=expected is not None,
            **{k: self.tensor(a) for k, a in exp.items()}, **{k: self.tensor(a) for k, a in args.items()})

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()
        device.synchronize()
