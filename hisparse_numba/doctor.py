"""``hisparse-numba doctor``: what this machine runs the kernels on, and what to fix.

It never raises: whatever fails to load (a bad ``HISPARSE_NUMBA_BACKEND``, ``cuda`` without a GPU,
a broken CuPy) becomes a known problem with its fix.
"""

from __future__ import annotations

import ctypes
import os
import platform
from importlib import metadata

from .compile_check import ARCHITECTURES, MIN_COMPUTE_CAPABILITY, compile_toolchain, compile_toolchain_missing

BACKEND_ENV = "HISPARSE_NUMBA_BACKEND"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cupy_dists() -> list[str]:
    names = []
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name == "cupy" or name.startswith("cupy-cuda"):
            names.append(f"{name} {dist.version}")
    return names


def driver_version() -> tuple[int, int] | None:
    """CUDA driver API version (major, minor) from libcuda, or None without a driver."""
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value:
            return v.value // 1000, (v.value % 1000) // 10
    return None


def _import_device():
    from . import device

    return device


def _backend_problem(exc: Exception) -> tuple[str, str]:
    """The known problem and fix for a device layer that refused to start."""
    choice = os.environ.get(BACKEND_ENV, "")
    text = str(exc)
    if isinstance(exc, ValueError):
        return text, f"unset {BACKEND_ENV} (auto) or set it to one of auto, cuda, simulator, compile-only"
    if "CuPy" in text:
        return text, "pip install 'hisparse-numba[cuda12]' (or [cuda13]: the CUDA major `nvidia-smi` shows)"
    if choice.strip().lower() == "cuda":
        return text, (f"unset {BACKEND_ENV} (auto picks the simulator on a CPU machine) or run on a "
                      "machine with an NVIDIA GPU and its driver")
    return text, f"set {BACKEND_ENV}=simulator, then run `hisparse-numba doctor` again"


def capability_problem(cc: tuple[int, int], name: str = "this GPU") -> tuple[str, str] | None:
    """A known problem when compute capability ``cc`` is below the supported minimum."""
    if tuple(cc) >= MIN_COMPUTE_CAPABILITY:
        return None
    lo = MIN_COMPUTE_CAPABILITY
    return (f"{name} has compute capability {cc[0]}.{cc[1]}, below the minimum {lo[0]}.{lo[1]} "
            f"(sm_{lo[0]}{lo[1]}, a T4) that hisparse-numba compiles and tests for",
            f"use a GPU of compute capability >= {lo[0]}.{lo[1]} ({ARCHITECTURES[lo][0]} or newer), "
            f"or {BACKEND_ENV}=simulator")


def gather() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(facts, problems): facts as (name, value); problems as (what, fix). Never raises."""
    facts: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    try:
        device = _import_device()
    except Exception as exc:  # doctor reports, never raises
        facts.append(("backend", f"unusable ({BACKEND_ENV}={os.environ.get(BACKEND_ENV, '')!r})"))
        _versions(facts)
        problems.append(_backend_problem(exc))
        return facts, problems
    try:
        _gather(device, facts, problems)
    except Exception as exc:
        problems.append((f"doctor could not finish: {type(exc).__name__}: {exc}",
                         f"report it with this output; {BACKEND_ENV}=simulator runs everything meanwhile"))
    return facts, problems


def _versions(facts) -> list[str]:
    facts.append(("python", platform.python_version()))
    for dist in ("numpy", "numba", "numba-cuda"):
        facts.append((dist, _version(dist) or "not installed"))
    cupy = _cupy_dists()
    facts.append(("cupy", ", ".join(cupy) if cupy else "not installed"))
    drv = driver_version()
    facts.append(("CUDA driver", f"{drv[0]}.{drv[1]}" if drv else "none"))
    lo = MIN_COMPUTE_CAPABILITY
    facts.append(("minimum GPU", f"compute capability {lo[0]}.{lo[1]} (sm_{lo[0]}{lo[1]})"))
    facts.append(("PTX compile", _toolchain_fact()))
    return cupy


def _toolchain_fact() -> str:
    """Whether kernels compile here (a GPU, the compile-only check): NVVM, NVRTC, libdevice."""
    missing = compile_toolchain_missing()
    if missing:
        return "no: " + missing
    return "yes (" + ", ".join(f"{piece.split()[0]} {path}" for piece, path, _ in compile_toolchain()) + ")"


def _gather(device, facts, problems) -> None:
    import numpy as np

    facts.append(("backend", device.backend()))
    cupy = _versions(facts)
    drv = driver_version()
    cache = device.kernel_cache_info()
    facts.append(("kernel cache", f"{cache['location']} ({cache['entries']} compiled kernels, "
                                  f"{cache['bytes'] / 1e6:.1f} MB)"
                  + ("" if cache["enabled"] else " (not used: GPU only, or HISPARSE_NUMBA_KERNEL_CACHE=0)")))

    if device.ROW_STACK_SHIM:
        problems.append((
            f"numpy {np.__version__} >= 2.5 removed numpy.row_stack, which numba-cuda 0.30 calls at "
            "the first kernel launch (AttributeError: module 'numpy' has no attribute 'row_stack'); "
            "hisparse-numba patched the alias back for this process",
            "pip install 'numpy>=2,<2.5'",
        ))
    nc = _version("numba-cuda")
    if nc and not nc.startswith("0.30."):
        problems.append((f"numba-cuda {nc} is not the tested 0.30.x (newer releases drop the CUDA simulator)",
                         "pip install 'numba-cuda>=0.30,<0.31'"))
    if os.environ.get(BACKEND_ENV, "auto").strip().lower() == "compile-only":
        problems.append((f"{BACKEND_ENV}=compile-only: kernels are compiled to PTX and never run",
                         f"unset {BACKEND_ENV} to run them (auto)"))

    if device.backend() == "cuda":
        missing = compile_toolchain_missing()
        if missing:
            problems.append((f"the GPU cannot compile kernels: {missing.split('. Fix:')[0]}",
                             f"pip install 'hisparse-numba[cuda{drv[0] if drv else 12}]' (NVVM, NVRTC and "
                             "libdevice for the driver's CUDA major)"))
        cp = device.xp
        rt = cp.cuda.runtime
        v = rt.runtimeGetVersion()
        facts.append(("CUDA runtime (CuPy)", f"{v // 1000}.{(v % 1000) // 10}"))
        props = rt.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        facts.append(("GPU", f"{name}, {props['totalGlobalMem'] / 2**30:.1f} GiB, "
                             f"compute capability {props['major']}.{props['minor']}, "
                             f"{props['multiProcessorCount']} SMs"))
        below = capability_problem((props["major"], props["minor"]), name)
        if below:
            problems.append(below)
        wheel_major = None
        for d in cupy:
            if d.startswith("cupy-cuda1"):
                wheel_major = int(d.split()[0][len("cupy-cuda"):-1])
        if drv and wheel_major and wheel_major > drv[0]:
            problems.append((f"the CuPy wheel is built for CUDA {wheel_major} but the driver is CUDA {drv[0]}",
                             f"pip install cupy-cuda{drv[0]}x (extra: hisparse-numba[cuda{drv[0]}])"))
    else:
        if device.backend() == "simulator":
            problems.append((
                "no usable CUDA GPU: kernels run in Numba's CUDA simulator, one Python thread per CUDA "
                "thread (about 5,000 threads per second). Results are exact, times are meaningless, "
                "`hisparse-numba bench` refuses to run, and tests use small sizes",
                "run on a machine with an NVIDIA GPU and install the CuPy extra for its CUDA major "
                "(hisparse-numba[cuda12] or [cuda13])",
            ))
        if drv and not cupy:
            problems.append((f"a CUDA {drv[0]} driver is present but CuPy is not installed",
                             f"pip install 'hisparse-numba[cuda{drv[0]}]'"))


def report() -> int:
    """Print the facts and the known problems; always 0 (a diagnosis is not a failure)."""
    facts, problems = gather()
    width = max(len(k) for k, _ in facts)
    print("hisparse-numba doctor")
    for key, value in facts:
        print(f"  {key:<{width}}  {value}")
    if not problems:
        print("known problems: none")
        return 0
    print("known problems:")
    for what, fix in problems:
        print(f"  - {what}")
        print(f"    fix: {fix}")
    return 0
