"""Merging closed intervals."""


def merge_intervals(intervals):
    """Merge closed intervals ``(start, end)`` given in any order.

    Overlapping or touching intervals (``(1, 3)`` and ``(3, 5)``) become one. Returns a new list of
    tuples sorted by start; the argument is not changed. Raises ValueError for an interval whose start
    is after its end.
    """
    out = []
    for start, end in intervals:
        if start > end:
            raise ValueError(f"interval ({start}, {end}) has start > end")
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
