"""Compile every kernel for the supported GPUs without a GPU: ``python -m hisparse_numba.compile_check``.

Run with ``HISPARSE_NUMBA_BACKEND=compile-only`` (NVVM is needed: the ``ptx`` extra, or the
``cuda12``/``cuda13`` one). Each kernel family's ``compile_examples()`` calls its launchers once on
small valid inputs; ``device.launch`` compiles each kernel to PTX instead of running it. Every
specialisation is then compiled for each architecture in :data:`ARCHITECTURES`, and its static
shared memory (the ``.shared`` arrays in the PTX) is checked against that architecture's limit.
This catches what the CUDA simulator never checks: typing errors, shared-array sizes that are not
compile-time constants or too large, float64 that sneaked into integer code.

``doctor`` reads :data:`MIN_COMPUTE_CAPABILITY` from here; importing this module does not import
Numba.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
import threading
import time

# compute capability -> (GPUs a workshop meets, max shared memory per block in bytes with opt-in)
ARCHITECTURES = {
    (7, 5): ("T4 (Colab), RTX 20xx, Quadro RTX", 64 * 1024),
    (8, 0): ("A100, A30", 163 * 1024),
    (8, 6): ("A10, A40, RTX 30xx, RTX A6000", 99 * 1024),
    (8, 9): ("L4, L40S, RTX 40xx", 99 * 1024),
    (9, 0): ("H100, H200, GH200", 227 * 1024),
}
MIN_COMPUTE_CAPABILITY = min(ARCHITECTURES)
# A kernel's static shared arrays (cuda.shared.array) may not exceed 48 KiB on any architecture;
# more needs dynamic shared memory and an opt-in, which these kernels do not use.
STATIC_SHARED_LIMIT = 48 * 1024

FAMILIES = (
    "hisparse_numba.hisparse.single_step.examples",
    "hisparse_numba.hisparse.speculative.examples",
    "hisparse_numba.kv_canary.examples",
)

# a declaration such as ".visible .shared .align 2 .b8 _cudapy_smem_1[8192];" (not ld/st.shared)
_SHARED_DECL = re.compile(r"^\s*(?:\.(?:visible|extern|weak)\s+)?\.shared\s+(?:\.align\s+\d+\s+)?"
                          r"\.[bsuf](\d+)\s+[^\s\[]+\[(\d+)\]", re.M)


PTX_FIX = ("pip install 'hisparse-numba[ptx]' (NVVM, NVRTC and libdevice as CUDA 13 wheels, about 460 MB; "
           "in a checkout: make test PTX=1)")


def _load_nvvm() -> str:
    from cuda.pathfinder import load_nvidia_dynamic_lib

    return load_nvidia_dynamic_lib("nvvm").abs_path


def _load_nvrtc() -> str:
    from cuda.pathfinder import load_nvidia_dynamic_lib

    return load_nvidia_dynamic_lib("nvrtc").abs_path


def _find_libdevice() -> str:
    from . import device

    path = device.libdevice_path()
    if not path or not os.path.isfile(path):
        raise FileNotFoundError("libdevice.10.bc not found in a conda environment, the NVVM wheel, "
                                "CUDA_HOME or /usr/local/cuda")
    return path


def compile_toolchain() -> list[tuple[str, str | None, str]]:
    """What compiling a kernel to PTX loads, found or not: ``(piece, path or None, why / error)``.

    numba-cuda 0.30 needs all three: NVVM turns the kernel's LLVM IR into PTX, libdevice is the
    math library NVVM links in, and NVRTC is asked which architectures may be compiled for before
    every compile (``nvrtc.get_supported_ccs``). A system CUDA can carry NVVM without NVRTC.
    """
    found = []
    for piece, find in (("NVVM (libnvvm)", _load_nvvm), ("NVRTC (libnvrtc)", _load_nvrtc),
                        ("libdevice (libdevice.10.bc)", _find_libdevice)):
        try:
            found.append((piece, find(), ""))
        except ImportError as exc:
            found.append((piece, None, f"numba-cuda or cuda-pathfinder does not import ({exc})"))
        except Exception as exc:  # each loader raises its own not-found error
            first = (str(exc).splitlines() or [""])[0].split(": ")[0]
            found.append((piece, None, f"{type(exc).__name__}: {first}"))
    return found


def compile_toolchain_missing() -> str | None:
    """Why kernels cannot be compiled to PTX here (the reason a compile test is skipped), or None."""
    missing = [(piece, error) for piece, path, error in compile_toolchain() if path is None]
    if not missing:
        return None
    names = " and ".join(piece for piece, _ in missing)
    them = "them" if len(missing) > 1 else "it"
    return f"{names} not found; compiling kernels to PTX needs {them} ({missing[0][1][:160]}). Fix: {PTX_FIX}"


def static_shared_bytes(ptx: str) -> int:
    """Bytes of the ``.shared`` arrays a PTX module declares (one kernel per module here)."""
    return sum(int(bits) // 8 * int(count) for bits, count in _SHARED_DECL.findall(ptx))


def arch_name(cc: tuple[int, int]) -> str:
    return f"sm_{cc[0]}{cc[1]}"


def compile_gather() -> None:
    import numpy as np

    from . import device
    from .hisparse.gather import gather_to_hot_buffer

    host = device.host_cache_array((8, 32), np.uint8)
    gather_to_hot_buffer(host_cache=host, device_buffer=np.zeros((8, 32), np.uint8),
                         src_locs=np.arange(4, dtype=np.int64), dst_locs=np.arange(4, dtype=np.int64),
                         item_size_bytes=32)


@contextlib.contextmanager
def _heartbeat(what: str, every_s: float = 30.0):
    """Print ``still compiling <what>`` every ``every_s`` seconds until the block ends."""
    done = threading.Event()
    t0 = time.perf_counter()

    def beat():
        while not done.wait(every_s):
            print(f"  ... still compiling {what} ({time.perf_counter() - t0:.0f} s)", flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def collect(cc: tuple[int, int]) -> dict:
    """Run every family's examples once: ``{(py_func, signature): PTX for cc}``."""
    from . import device

    device.COMPILE_TARGET_CC = cc
    t0 = time.perf_counter()
    with _heartbeat("the gather"):
        compile_gather()
    for name in FAMILIES:
        with _heartbeat(name):
            importlib.import_module(name).compile_examples()
        print(f"  {name}: {len(device.compiled_signatures)} specialisations so far "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return dict(device.compiled_signatures)


def check_architecture(cc: tuple[int, int], specialisations: dict, collected_cc) -> list[str]:
    """Compile every specialisation for ``cc``; the problems found (empty when all is well)."""
    from . import device

    limit = min(ARCHITECTURES[cc][1], STATIC_SHARED_LIMIT)
    problems = []
    for (fn, sig), ptx in specialisations.items():
        if cc != collected_cc:
            try:
                with _heartbeat(f"{fn.__qualname__} for {arch_name(cc)}"):
                    ptx, _ = device.cuda.compile_ptx(fn, sig, cc=cc)
            except Exception as exc:  # report every failing kernel, not only the first
                problems.append(f"{fn.__qualname__}{sig}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                continue
        shared = static_shared_bytes(ptx)
        if shared > limit:
            problems.append(f"{fn.__qualname__}{sig}: {shared} bytes of shared memory > {limit} on {arch_name(cc)}")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hisparse_numba.compile_check",
        description="Compile every kernel to PTX for each supported GPU architecture (no GPU needed).")
    parser.add_argument("--arch", nargs="+", default=[arch_name(cc) for cc in ARCHITECTURES],
                        help="architectures to check, e.g. sm_75 sm_90 (default: all supported)")
    args = parser.parse_args(argv)
    wanted = []
    for name in args.arch:
        match = re.fullmatch(r"(?:sm_)?(\d)(\d)", name.strip())
        if not match or (int(match[1]), int(match[2])) not in ARCHITECTURES:
            parser.error(f"--arch {name!r}: supported are {', '.join(arch_name(cc) for cc in ARCHITECTURES)}")
        wanted.append((int(match[1]), int(match[2])))

    from . import device

    if not device.COMPILE_ONLY:
        raise SystemExit("run with HISPARSE_NUMBA_BACKEND=compile-only")
    print(f"compiling every kernel for {', '.join(map(arch_name, wanted))} "
          "(minutes under load: one line per step)", flush=True)
    specialisations = collect(wanted[0])
    kernels = sorted({fn.__qualname__ for fn, _ in specialisations})
    failed = False
    for cc in wanted:
        t0 = time.perf_counter()
        problems = check_architecture(cc, specialisations, wanted[0])
        status = "ok" if not problems else f"{len(problems)} problem(s)"
        print(f"{arch_name(cc)}: {len(specialisations)} specialisations, {status} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        for problem in problems:
            print(f"  {problem}", flush=True)
        failed = failed or bool(problems)
    print(f"compiled {len(specialisations)} kernel specialisations to PTX: {', '.join(kernels)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
