"""Checker for lesson 10 (16-byte items and base addresses)."""

from __future__ import annotations

CASES = [1, 8, 15, 16, 17, 32, 584, 576, 1152, 656, 37440]


def check_pad(pad) -> bool:
    """``pad(nbytes)`` must return the smallest multiple of 16 that is >= nbytes."""
    for n in CASES:
        want = -(-n // 16) * 16
        try:
            got = int(pad(n))
        except Exception as exc:  # a learner's function may fail in any way
            print(f"wrong: pad({n}) raised {type(exc).__name__}: {exc}")
            return False
        if got != want:
            print(f"wrong: pad({n}) = {got}, expected the smallest multiple of 16 >= {n}, {want}")
            return False
    print(f"right: pad gives 16-byte multiples for all of {CASES} (584 -> 592)")
    return True


def check_aligned_offsets(offsets, item_size_bytes: int, count: int = 8) -> bool:
    """``offsets`` must list the items ``0..count-1`` whose byte offset is 16-aligned."""
    want = [i for i in range(count) if (i * item_size_bytes) % 16 == 0]
    if sorted(int(i) for i in offsets) == want:
        print(f"right: with {item_size_bytes}-byte items, items {want} start on a 16-byte boundary")
        return True
    print(f"wrong: item i starts at byte i * {item_size_bytes}; check (i * {item_size_bytes}) % 16 for i < {count}")
    return False
