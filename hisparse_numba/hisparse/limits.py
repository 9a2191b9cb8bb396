"""Sizes the HiSparse kernels are compiled for, shared by the miss plan and the speculative family."""

MAX_OCCURRENCES = 8192  # speculative: steps * top_k per request; compact entries keep a position in 13 bits
