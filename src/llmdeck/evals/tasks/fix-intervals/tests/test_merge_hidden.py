"""Hidden checks: the repo's own tests, and what its docstring promises but its tests do not check."""

import pytest

from intervals import merge_intervals


def test_sorted_overlaps():
    assert merge_intervals([(1, 3), (2, 6), (8, 10)]) == [(1, 6), (8, 10)]


def test_unsorted_input():
    assert merge_intervals([(8, 10), (1, 3), (2, 6)]) == [(1, 6), (8, 10)]


def test_empty():
    assert merge_intervals([]) == []


def test_touching_intervals_merge():
    assert merge_intervals([(3, 5), (1, 3)]) == [(1, 5)]


def test_nested_interval():
    assert merge_intervals([(1, 10), (2, 3), (4, 5)]) == [(1, 10)]


def test_input_not_mutated():
    data = [(8, 10), (1, 3)]
    merge_intervals(data)
    assert data == [(8, 10), (1, 3)]


def test_tuple_input_accepted():
    assert merge_intervals(((5, 6), (1, 2))) == [(1, 2), (5, 6)]


def test_reversed_interval_rejected():
    with pytest.raises(ValueError):
        merge_intervals([(1, 2), (5, 3)])
