# Solutions of lesson 10: each section is the solved exercise cell, checker call included.

# exercise: 10-a
def pad(nbytes):
    return (nbytes + 15) // 16 * 16

ex10.check_pad(pad);

# exercise: 10-b
aligned_items = [0, 2, 4, 6]

ex10.check_aligned_offsets(aligned_items, item_size_bytes=584);
