"""The kernel puzzles of lessons 14 and 15: machinery (``harness``, ``pictures``, ``warp_votes``) and
the puzzles themselves, grouped by what the threads share (``maps``, ``rows``: lesson 14;
``cooperate``, ``scans``: lesson 15). The notebooks import ``ex14``/``ex15``, not these modules."""
