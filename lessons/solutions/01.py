# Solutions of lesson 01: each section is the solved exercise cell, checker call included.

# exercise: 01-a
def plan_for(padded_batch, real_batch, num_steps, num_top_k):
    return alloc_miss_plan(padded_batch, num_steps, num_top_k)

ex01.check(plan_for);
