"""Areas of plane shapes."""

import math


def _check(*values):
    if any(v < 0 for v in values):
        raise ValueError("negative dimension")


class Circle:
    def __init__(self, r):
        _check(r)
        self.r = r

    def area(self):
        return math.pi * self.r * self.r


class Rectangle:
    def __init__(self, w, h):
        _check(w, h)
        self.w, self.h = w, h

    def area(self):
        return self.w * self.h


class Triangle:
    def __init__(self, base, height):
        _check(base, height)
        self.base, self.height = base, height

    def area(self):
        return self.base * self.height


SHAPES = {"circle": Circle, "rectangle": Rectangle, "triangle": Triangle}


def area(kind, **dims):
    """The area of a shape of ``kind`` (circle: r; rectangle: w, h; triangle: base, height).

    Raises ValueError for an unknown kind or a negative dimension.
    """
    cls = SHAPES.get(kind)
    if cls is None:
        return None
    return cls(**dims).area()
