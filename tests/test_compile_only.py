"""Every kernel compiles for each supported GPU (sm_75 ... sm_90 PTX through NVVM), even on a CPU-only
machine, and its shared memory fits that architecture. The package's device functions are inlined by
NVVM here (``HISPARSE_NUMBA_INLINE=nvvm``): each is typed once instead of at every call site, so
every rung of every kernel reaches PTX in seconds; the typing and the shared arrays checked are the
same as with Numba's inlining. Needs NVVM, NVRTC and libdevice (the ``ptx``
extra); without one of them the compile tests are skipped, naming the missing piece."""

import os
import subprocess
import sys

import pytest

from hisparse_numba import compile_check

TOOLCHAIN_MISSING = compile_check.compile_toolchain_missing()
needs_toolchain = pytest.mark.skipif(TOOLCHAIN_MISSING is not None, reason=TOOLCHAIN_MISSING or "")


@needs_toolchain
@pytest.mark.slow(seconds=120)   # every kernel for one architecture: about 2 min on one core
@pytest.mark.parametrize("cc", list(compile_check.ARCHITECTURES), ids=compile_check.arch_name)
def test_every_kernel_compiles_for(cc):
    env = dict(os.environ, HISPARSE_NUMBA_BACKEND="compile-only", HISPARSE_NUMBA_INLINE="nvvm")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    out = subprocess.run([sys.executable, "-m", "hisparse_numba.compile_check", "--arch", compile_check.arch_name(cc)],
                         env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{compile_check.arch_name(cc)}: " in out.stdout and ", ok (" in out.stdout


def test_the_supported_architectures_start_at_the_t4():
    assert compile_check.MIN_COMPUTE_CAPABILITY == (7, 5)
    assert [compile_check.arch_name(cc) for cc in compile_check.ARCHITECTURES] == \
        ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]


def test_static_shared_memory_is_read_from_ptx():
    ptx = (".visible .entry k(\n"
           ".visible .shared .align 4 .b8 _cudapy_smem_1[16384];\n"
           "\t.shared .align 2 .b8 _cudapy_smem_2[8192];\n"
           "\tst.shared.u16 \t[%rd8], %rs1;\n\tld.shared.u16 \t%rs2, [_cudapy_smem_1];\n")
    assert compile_check.static_shared_bytes(ptx) == 16384 + 8192


def test_a_bad_architecture_is_refused_in_one_line():
    out = subprocess.run([sys.executable, "-m", "hisparse_numba.compile_check", "--arch", "sm_70"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "supported are sm_75" in out.stderr


LOADERS = {"NVVM": "_load_nvvm", "NVRTC": "_load_nvrtc", "libdevice": "_find_libdevice"}


def _without(monkeypatch, *pieces):
    """The toolchain as found, except ``pieces``, whose loaders raise as cuda-pathfinder does."""
    def found(name):
        return lambda: f"/somewhere/{name}"

    def not_found(name):
        def load():
            raise RuntimeError(f'Failure finding "{name}": No such file: {name}')
        return load

    for piece, loader in LOADERS.items():
        monkeypatch.setattr(compile_check, loader, not_found(piece) if piece in pieces else found(piece))


@pytest.mark.parametrize("piece", list(LOADERS))
def test_each_missing_piece_is_named_in_the_skip_reason(monkeypatch, piece):
    _without(monkeypatch, piece)
    reason = compile_check.compile_toolchain_missing()
    assert reason.startswith(piece) and "not found" in reason and f'Failure finding "{piece}"' in reason
    assert [p for p in LOADERS if p != piece and p in reason.split(";")[0]] == []
    assert "make test PTX=1" in reason and "pip install 'hisparse-numba[ptx]'" in reason


def test_two_missing_pieces_are_both_named(monkeypatch):
    _without(monkeypatch, "NVRTC", "libdevice")
    assert compile_check.compile_toolchain_missing().startswith(
        "NVRTC (libnvrtc) and libdevice (libdevice.10.bc) not found; compiling kernels to PTX needs them")


def test_with_every_piece_nothing_is_missing(monkeypatch):
    _without(monkeypatch)
    assert compile_check.compile_toolchain_missing() is None
    assert [path for _, path, _ in compile_check.compile_toolchain()] == \
        ["/somewhere/NVVM", "/somewhere/NVRTC", "/somewhere/libdevice"]


def test_nvrtc_missing_beside_a_system_nvvm_is_caught_by_the_real_loader(monkeypatch):
    """The machine this skip was written for: cuda-pathfinder finds libnvvm but not libnvrtc."""
    import cuda.pathfinder

    real = cuda.pathfinder.load_nvidia_dynamic_lib

    def no_nvrtc(name):
        if name == "nvrtc":
            raise cuda.pathfinder.DynamicLibNotFoundError('Failure finding "libnvrtc.so.13": No such file')
        return real(name)
    monkeypatch.setattr(cuda.pathfinder, "load_nvidia_dynamic_lib", no_nvrtc)
    reason = compile_check.compile_toolchain_missing()
    assert reason and "NVRTC (libnvrtc)" in reason and 'Failure finding "libnvrtc.so.13"' in reason


def test_the_doctor_reports_the_toolchain(monkeypatch):
    from hisparse_numba import doctor

    _without(monkeypatch, "NVRTC")
    facts = dict(doctor.gather()[0])
    assert facts["PTX compile"].startswith("no: NVRTC (libnvrtc) not found")
    _without(monkeypatch)
    assert dict(doctor.gather()[0])["PTX compile"] == \
        "yes (NVVM /somewhere/NVVM, NVRTC /somewhere/NVRTC, libdevice /somewhere/libdevice)"


def test_long_compiles_print_a_heartbeat(capsys):
    import time
    with compile_check._heartbeat("a kernel", every_s=0.05):
        time.sleep(0.2)
    assert "still compiling a kernel" in capsys.readouterr().out
