# Solutions of lesson 12: each section is the solved exercise cell, checker call included.

# exercise: 12-a
ex = plan_problem([1, 0, 2, 3], [10, 7, 3, 12], [1, 0, 1, 1], max_reqs=4, max_seq_len=MAX_SEQ,
                  swa_window_size=5, full_to_swa_index_mapping=np.arange(64, dtype=np.int64))

answer = 5 + 0 + 3 + 5

ex12.check_capacity(ex, answer);
