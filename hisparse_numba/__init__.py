"""hisparse-numba: sglang's HiSparse and kv-canary KV-cache kernels in Numba CUDA."""
__version__ = "0.1.0"
