# Solutions of lesson 08: each section is the solved exercise cell, checker call included.

# exercise: 08-a
def plan_rows(plan, batch, num_real):
    return {k: v[:batch] for k, v in plan.items()}

ex08.check_plan_rows(plan_rows);
