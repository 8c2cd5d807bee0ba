"""Areas of plane shapes."""

import math


def area(kind, **dims):
    """The area of a shape of ``kind`` (circle: r; rectangle: w, h; triangle: base, height).

    Raises ValueError for an unknown kind or a negative dimension.
    """
    if kind == "circle":
        r = dims["r"]
        if r < 0:
            raise ValueError("negative dimension")
        return math.pi * r * r
    elif kind == "rectangle":
        w, h = dims["w"], dims["h"]
        if w < 0 or h < 0:
            raise ValueError("negative dimension")
        return w * h
    elif kind == "triangle":
        base, height = dims["base"], dims["height"]
        if base < 0 or height < 0:
            raise ValueError("negative dimension")
        return 0.5 * base * height
    else:
        raise ValueError(f"unknown shape {kind!r}")
