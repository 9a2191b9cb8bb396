# Solutions of lesson 09: each section is the solved exercise cell, checker call included.

# exercise: 09-a
ex = problem(hot_buffer_size=6)
ex["device_buffer_tokens"][0, :6] = [0, 1, 12, 3, 14, 5]

miss_slots = [0, 1, 3, 5]
lru_after = [0, 1, 3, 5, 2, 4]

ex09.check(ex, miss_slots, lru_after);
