# Solutions of lesson 02: each section is the solved exercise cell, checker call included.

# exercise: 02-a
def plan_step(verify_plan, write_plan, inputs):
    launch_canary_plan_kernels(verify_plan_out=verify_plan, write_plan_out=write_plan,
                               verify_capacity=int(verify_plan.verify_slot_indices.shape[0]), **inputs)

ex02.check_plan_step(plan_step);
