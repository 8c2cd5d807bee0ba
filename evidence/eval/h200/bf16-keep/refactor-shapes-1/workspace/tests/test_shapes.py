import math

import pytest

from shapes import area


def test_circle():
    assert area("circle", r=2.0) == pytest.approx(4 * math.pi)


def test_rectangle():
    assert area("rectangle", w=2.0, h=3.0) == 6.0


def test_negative():
    with pytest.raises(ValueError):
        area("rectangle", w=-1.0, h=3.0)
