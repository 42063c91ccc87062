import math

from scaletune.analysis._values import best_so_far


def test_best_so_far_in_either_direction_skipping_unknown_values() -> None:
    values = [None, 0.5, math.nan, 0.3, 0.7, None]
    assert best_so_far(values, maximize=True) == [None, 0.5, 0.5, 0.5, 0.7, 0.7]
    assert best_so_far(values, maximize=False) == [None, 0.5, 0.5, 0.3, 0.3, 0.3]
