# Solutions of lesson 07: each section is the solved exercise cell, checker call included.

# exercise: 07-a
def strides_match(miss_src, miss_dst):
    return miss_src.strides[0] // miss_src.itemsize == miss_dst.strides[0] // miss_dst.itemsize

ex07.check_strides_match(strides_match);
