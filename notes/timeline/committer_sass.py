"""The committer configuration of the speculative kernel (``swap_kernel(1, True, True)``, the one
batch 1 runs) compiled for sm_90 without a GPU, as the GPU build compiles it (launch bounds of
1024 threads, so at most 64 registers): PTX, ``ptxas -v`` (registers, stack frame, spills) and,
where ``nvdisasm`` is given, the SASS cut at its barriers, one line per piece (instructions,
local loads and stores, global loads and stores, atomics, hash constants, shuffles).

    HISPARSE_NUMBA_BACKEND=compile-only python notes/timeline/committer_sass.py OUT_PREFIX \\
        [PTXAS [NVDISASM]]

The package compiled is the one ``import hisparse_numba`` finds (set PYTHONPATH to a copy in
.final/ to compile it). About 3 minutes on a 2-core machine: the examples compile first, for the
kernel's argument types. This machine's ptxas is CUDA 13.0's, so the PTX's ``.version`` is lowered
to 9.0; ``nvdisasm`` is in the ``nvidia-cuda-nvdisasm`` wheel (``pip download --no-deps``)."""
import re
import subprocess
import sys

from hisparse_numba import device
from hisparse_numba.device import cuda
from hisparse_numba.hisparse.speculative import examples as spec_examples
from hisparse_numba.hisparse.speculative import kernel


def barrier_pieces(sass: str) -> list:
    """One summary line per run of SASS instructions up to a barrier or an exit."""
    pieces, current = [], []
    for line in sass.splitlines():
        if re.search(r"/\*[0-9a-f]{4,}\*/", line):
            current.append(line)
            if "BAR." in line or "EXIT" in line:
                pieces.append(current)
                current = []
    pieces.append(current)
    rows = []
    for i, piece in enumerate(pieces):
        text = "\n".join(piece)
        count = lambda pattern: len(re.findall(pattern, text))
        marks = [name for name, pattern in (("h1", "0x7feb352d"), ("membar", "MEMBAR"),
                                            ("shfl", "SHFL.UP")) if pattern in text]
        start = re.search(r"/\*([0-9a-f]+)\*/", piece[0]).group(1) if piece else "-"
        rows.append(f"{i:4d} @{start:>6} n={len(piece):5d} LDL={count('LDL'):3d} STL={count('STL'):3d} "
                    f"LDG={count('LDG'):3d} STG={count('STG'):3d} atom={count('ATOMG|RED.E'):2d} "
                    f"{' '.join(marks)}")
    return rows


def main() -> None:
    prefix = sys.argv[1]
    ptxas = sys.argv[2] if len(sys.argv) > 2 else "/usr/local/cuda-13.0/bin/ptxas"
    nvdisasm = sys.argv[3] if len(sys.argv) > 3 else None
    spec_examples.compile_examples()
    sig = [s for (f, s) in device.compiled_signatures if f.__name__ == "swap"][-1]   # record=True
    ptx, _ = cuda.compile_ptx(kernel.swap_kernel(1, True, True).py_func, sig, cc=(9, 0),
                              launch_bounds=1024)
    ptx = re.sub(r"\.version \d+\.\d+", ".version 9.0", ptx)
    with open(prefix + ".ptx", "w") as f:
        f.write(ptx)
    run = subprocess.run([ptxas, "-arch=sm_90", "-v", prefix + ".ptx", "-o", prefix + ".cubin"],
                         capture_output=True, text=True)
    print("\n".join(l for l in (run.stdout + run.stderr).splitlines() if "ptxas info    : Used" in l
                    or "spill" in l or "error" in l))
    if nvdisasm and run.returncode == 0:
        sass = subprocess.run([nvdisasm, "-c", prefix + ".cubin"], capture_output=True,
                              text=True).stdout
        with open(prefix + ".sass", "w") as f:
            f.write(sass)
        print("\n".join(barrier_pieces(sass)))


if __name__ == "__main__":
    main()
