"""The order the suite runs in: the long tests first, each beside a quick one (tests/conftest.py)."""

import pytest

from . import conftest


class Item:
    def __init__(self, name, seconds):
        self.name, self.seconds = name, seconds

    def __repr__(self):
        return self.name


@pytest.fixture
def timed(monkeypatch):
    monkeypatch.setattr(conftest, "slow_seconds", lambda item: item.seconds)


def test_long_tests_first_each_followed_by_a_quick_one(timed):
    items = [Item("a", 0), Item("b", 10), Item("c", 0), Item("d", 120), Item("e", 0), Item("f", 120),
             Item("g", 60)]
    assert [i.name for i in conftest.longest_first(items)] == ["d", "e", "f", "c", "g", "a", "b"]


def test_without_enough_quick_tests_the_slow_ones_follow_each_other(timed):
    assert [i.name for i in conftest.longest_first([Item("a", 10), Item("b", 10), Item("c", 0)])] == \
        ["a", "c", "b"]


def test_a_suite_without_slow_tests_keeps_pytests_order(timed):
    items = [Item(n, 0) for n in "xyz"]
    assert conftest.longest_first(items) == items


def test_slow_seconds_reads_the_marker(request):
    assert conftest.slow_seconds(request.node) == 0
    request.node.add_marker(pytest.mark.slow(seconds=120))
    assert conftest.slow_seconds(request.node) == 120
