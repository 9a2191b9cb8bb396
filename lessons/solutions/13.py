# Solutions of lesson 13: each section is the solved exercise cell, checker call included.

# exercise: 13-a
def corrupted_rows(ring, write_index):
    rows = ring[:min(int(write_index[0]), ring.shape[0])]
    hit = rows[(rows[:, 7] & int(FailReason.VERIFY_REAL_KV_HASH_MISMATCH)) != 0]
    return sorted({int(slot) - 1 for slot in hit[:, 1]})

print("this lesson's ring:", corrupted_rows(ring, index))
ex13.check_corrupted_rows(corrupted_rows);
