"""Catalogue entries, last part: the generic CUDA failures a kernel bug ends in (an illegal address,
a misaligned address, an unspecified launch failure), as CUDA, CuPy, Numba, PyTorch and
compute-sanitizer print them, and the simulator's ``IndexError`` for the same bug. Each names the
lessons whose bug produces it and how to find the thread that faulted."""

from __future__ import annotations

from .entry import CUDA, Entry

# Every lesson whose bug writes or reads outside a buffer: an undersized miss plan (01, 08, 13),
# verify_capacity larger than the plan (02), an int64 plan read as int32 (05), a hot buffer
# smaller than top_k (09), a pageable host tensor in sglang's torch kernel (11), SWA slots read
# without their translation (12).
OUT_OF_BOUNDS_LESSONS = ("01", "02", "05", "08", "09", "11", "12", "13")

FIND_THE_THREAD = (
    "Find the thread: run the same script again with HISPARSE_NUMBA_BACKEND=simulator, where the "
    "bad access raises IndexError naming the thread (tid=[x, y, z], its block ctaid=[x, y, z]) and "
    "the index (lesson 00 reads one); on the GPU, compute-sanitizer --tool memcheck python "
    "script.py names the kernel, thread, block and address; CUDA_LAUNCH_BLOCKING=1 reports the "
    "error at the launch that faulted instead of a later call. Restart the process afterwards: "
    "the CUDA context cannot recover. hisparse-numba's launchers check every index first "
    '(checks="full"), so a fault here means checks="shapes", launch_unchecked, or a bug to report.')

ENTRIES: list[Entry] = [
    Entry(
        "an illegal memory access was encountered",
        "A kernel thread read or wrote an address outside every allocation: an index past the "
        "end of a buffer or below 0, a plan row written past its end, or a host pointer handed to "
        "the device. The GPU reports it at the next call that waits for the kernel, often far "
        "from it, and every later CUDA call in the process fails too. In the lessons: an "
        "undersized miss plan (01, 08, 13), verify_capacity larger than the plan (02), an int64 "
        "plan read as int32 (05), a hot buffer smaller than top_k (09), a pageable host tensor in "
        "sglang's kernel (11), SWA slots read without their translation (12). The simulator "
        "raises IndexError for the same access.",
        FIND_THE_THREAD, "00", CUDA,
        variants=("CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress",
                  "Address {address} is out of bounds",
                  "index {index} is out of bounds for axis {axis} with size {size}"),
        also=OUT_OF_BOUNDS_LESSONS),
    Entry(
        "misaligned address",
        "A thread made a vector access (an 8- or 16-byte load or store) at an address that is not "
        "a multiple of its size: items whose size is not a multiple of 16 bytes (584-byte items), "
        "or a pool sliced at an odd offset. sglang's HiSparse item copy moves 16-byte chunks and "
        "does not check; hisparse-numba's launchers raise 'The pointers must be multiple of 16 "
        "bytes.' first. The simulator does not model alignment.",
        "Pad items to a multiple of 16 bytes and allocate pools whole (device.host_cache_array, "
        "a fresh device array). compute-sanitizer --tool memcheck python script.py reports "
        "'Address ... is misaligned' with the thread and block; CUDA_LAUNCH_BLOCKING=1 reports "
        "the error at the launch that faulted. Restart the process afterwards.",
        "10", CUDA,
        variants=("CUDA_ERROR_MISALIGNED_ADDRESS", "cudaErrorMisalignedAddress",
                  "Address {address} is misaligned")),
    Entry(
        "unspecified launch failure",
        "A kernel died without a more specific error code. On many GPUs (and for accesses to "
        "mapped host memory) an out-of-bounds or misaligned access ends this way, so its causes "
        "are those of an illegal memory access (lessons 01, 02, 05, 08, 09, 11, 12, 13) and of a "
        "misaligned address (lesson 10); a kernel stopped by the display watchdog also ends so.",
        FIND_THE_THREAD, "00", CUDA,
        variants=("CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure"),
        also=tuple(sorted((*OUT_OF_BOUNDS_LESSONS, "10")))),
]
