"""GPU benchmarks: one module per kernel family, timed by ``harness`` against measured ceilings."""
