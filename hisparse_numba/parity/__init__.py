"""Parity check against the real sglang (>= 0.5.23): ``hisparse-numba parity``.

For users who have sglang's kernels (sglang, apache-tvm-ffi and torch on a CUDA machine), this
runs sglang's own launchers and this project's on identical inputs in one process, sharing the
memory (DLPack views of the device arrays, the mapped pinned host pool seen by both), for the
single-step swap-in, the speculative swap-in (few misses / union mode, approximate mode, direct
overflow, and a state handed from one implementation to the other) and the kv-canary
plan / write / verify. It compares byte for byte where sglang is deterministic and at slot level
where sglang numbers misses with an atomic race, times both sides the same way, and lists what it
could not compare and why.

Modules: ``sides`` (the two implementations behind one interface), ``compare`` (the checks),
``cases`` (inputs and regimes), ``command`` (the CLI subcommand and the report).
"""

from .command import add_arguments, run

__all__ = ["add_arguments", "run"]
