"""Every kernel compiles for each supported GPU (sm_75 ... sm_90 PTX through NVVM), even on a CPU-only
machine, and its shared memory fits that architecture. Needs NVVM (the ``ptx`` extra)."""

import os
import subprocess
import sys

import pytest

from hisparse_numba import compile_check

NVVM_MISSING = compile_check.nvvm_missing()
needs_nvvm = pytest.mark.skipif(NVVM_MISSING is not None, reason=NVVM_MISSING or "")


@needs_nvvm
@pytest.mark.slow(seconds=120)   # every kernel for one architecture: about 2 min on one core
@pytest.mark.parametrize("cc", list(compile_check.ARCHITECTURES), ids=compile_check.arch_name)
def test_every_kernel_compiles_for(cc):
    env = dict(os.environ, HISPARSE_NUMBA_BACKEND="compile-only")
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


def test_without_nvvm_the_check_is_skipped_with_the_fix(monkeypatch):
    import cuda.pathfinder

    def not_found(name):
        raise RuntimeError(f"lib{name} not found")
    monkeypatch.setattr(cuda.pathfinder, "load_nvidia_dynamic_lib", not_found)
    reason = compile_check.nvvm_missing()
    assert "NVVM is not installed" in reason and "make test PTX=1" in reason and ".[ptx]" in reason


def test_long_compiles_print_a_heartbeat(capsys):
    import time
    with compile_check._heartbeat("a kernel", every_s=0.05):
        time.sleep(0.2)
    assert "still compiling a kernel" in capsys.readouterr().out
