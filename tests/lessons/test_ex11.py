"""Lesson 11's checker: bytes over PCIe per launch, pageable vs mapped; placeholders and
answers that are not whole numbers."""

import numpy as np
import pytest

from hisparse_numba.lessons import ex11
from tests.lessons.verdicts import assert_verdict

KW = dict(pool_items=100_000, item_size_bytes=1152, misses=256)
POOL = 100_000 * 1152


@pytest.mark.parametrize("copied,needed,word,names", [
    (2 * POOL, 256 * 1152, "right", ()),
    (POOL, 256 * 1152, "wrong", ("one direction",)),
    (256 * 1152, 256 * 1152, "wrong", ("WHOLE pool",)),
    (2 * POOL, 2 * 256 * 1152, "wrong", ("nothing is copied back",)),
    (2 * POOL, POOL, "wrong", ("read in place",)),
    (..., ..., "not yet", ("replace ...",)),
    (None, None, "not yet", ("replace ...",)),
    (2 * POOL, None, "not yet", ("replace ...",)),
    (np.int64(2 * POOL), np.int32(256 * 1152), "right", ()),
    (2 * POOL / 1, 256 * 1152, "wrong", ("copied is 230400000.0, a float", "whole number")),
    (2 * POOL, np.float64(256 * 1152), "wrong", ("needed is", "float64", "whole number")),
    (True, 256 * 1152, "wrong", ("copied is True, a bool",)),
    (str(2 * POOL), 256 * 1152, "wrong", ("copied is the string '230400000'", "without quotes")),
    ([2 * POOL], 256 * 1152, "wrong", ("copied is [230400000] (list)",)),
])
def test_check_bytes(capsys, copied, needed, word, names):
    assert_verdict(capsys, ex11.check_bytes(copied, needed, **KW), word, *names)


def test_ex11_warning_text_matches_the_catalogue():
    from hisparse_numba import errors

    assert errors.explain(ex11.HOST_COPY_WARNING)[0].lesson == "11"
