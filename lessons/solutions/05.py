# Solutions of lesson 05: each section is the solved exercise cell, checker call included.

# exercise: 05-a
def make_plan(batch, num_top_k):
    return (xp.full((batch, num_top_k), -1, dtype=xp.int64),
            xp.full((batch, num_top_k), -1, dtype=xp.int32),
            xp.zeros(batch, dtype=xp.int32))

ex05.check_make_plan(make_plan);
