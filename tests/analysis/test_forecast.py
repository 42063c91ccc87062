"""Learning-curve forecasts (pow3 least squares), on curves whose end is known."""

from __future__ import annotations

import numpy as np
import pytest

from scaletune.analysis._forecast import forecast
from scaletune.spec._names import FORECAST_MIN_REPORTS


def pow3(steps: range, a: float, b: float, c: float) -> list[float]:
    return [a - b * step ** (-c) for step in steps]


def test_too_few_reports_forecast_nothing() -> None:
    assert FORECAST_MIN_REPORTS == 4
    assert forecast([1, 2, 3], [0.5, 0.6, 0.65], at=100) is None


def test_a_pow3_curve_is_followed_to_its_end() -> None:  # c = 0.7 is on the grid
    steps = range(1, 10)
    ahead = forecast(list(steps), pow3(steps, 0.9, 0.4, 0.7), at=200)
    assert ahead == pytest.approx(0.9 - 0.4 * 200**-0.7, abs=1e-4)
    assert (
        ahead is not None and ahead > 0.85
    )  # where the curve stood at step 9: 0.9 - 0.4 * 9**-0.7 = 0.81


def test_an_exponent_between_the_grids_points_is_followed_closely() -> None:
    steps = range(2, 20)
    ahead = forecast(list(steps), pow3(steps, 0.8, 0.3, 0.737), at=100)
    assert ahead == pytest.approx(0.8 - 0.3 * 100**-0.737, abs=2e-3)


def test_a_falling_curve_is_forecast_to_fall() -> None:
    steps = range(1, 10)
    values = pow3(steps, 0.3, -0.5, 0.5)  # a loss that goes down towards 0.3
    ahead = forecast(list(steps), values, at=100)
    assert ahead == pytest.approx(0.3 + 0.5 * 100**-0.5, abs=1e-3)
    assert ahead is not None and ahead < values[-1]


def test_a_flat_curve_stays_where_it_is() -> None:
    assert forecast([1, 2, 3, 4], [0.7] * 4, at=50) == 0.7


def test_no_forecast_goes_further_than_the_curve_has_shown() -> None:
    # A straight line: pow3 can only bend it; whatever it fits is cut back to one observed
    # range beyond the observed values.
    ahead = forecast([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4], at=10**6)
    assert ahead is not None and 0.4 < ahead <= 0.7 + 1e-12


def test_units_do_not_matter() -> None:
    steps = list(range(2, 12))
    rng = np.random.default_rng(0)
    values = [v + rng.normal(0, 0.01) for v in pow3(range(2, 12), 0.8, 0.5, 0.8)]
    ahead = forecast(steps, values, at=60)
    scaled = forecast(steps, [100 * v - 3 for v in values], at=60)
    assert ahead is not None and scaled == pytest.approx(100 * ahead - 3, rel=1e-6)


def test_what_cannot_be_fitted_forecasts_nothing() -> None:
    assert forecast([1, 2, 3, 4], [0.1, float("nan"), 0.3, 0.4], at=10) is None
    assert forecast([0, 1, 2, 3], [0.1, 0.2, 0.3, 0.4], at=10) is None  # step 0: x**-c
