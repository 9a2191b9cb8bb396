# Solutions of lesson 11: each section is the solved exercise cell, checker call included.

# exercise: 11-a
copied = 2 * 100_000 * 1152
needed = 256 * 1152

ex11.check_bytes(copied, needed, pool_items=100_000, item_size_bytes=1152, misses=256);
