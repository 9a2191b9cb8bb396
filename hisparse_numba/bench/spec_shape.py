"""sglang's kernel benchmark configuration of the speculative swap-in, as ``bench spec`` runs it.

``bench spec`` times it; ``warmup --all`` compiles the configurations it launches
(``warmup.bench_spec_tasks``), which is why the sizes live apart from the benchmark: warmup sits
below the benchmarks and reads them here. ``bench/spec.py``'s docstring explains each figure.
"""

NUM_STEPS, TOP_K, HOT, PAGE = 4, 2048, 4096, 64   # steps, top-k, hot buffer, extra page
ITEM_WORDS = 72                                    # 576-byte items
MISS_PER_STEP, UNIQUE_MISSES, MISS_ADVANCE = 196, 782, 800  # per request; tails move on per call
SCRATCH = 4096                                     # scratch entries per request
SGLANG_US = {1: 28.0, 8: 92.0, 64: 613.0}          # sglang's launch pair, us per batch
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_VARIANTS = ("lru_1_full", "spec_1_full", "spec_4_full", "spec_1_full_3_shared")
