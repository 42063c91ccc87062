"""Where a learning curve is heading: the value a trial's reports so far point to at a later
step, for Hyperband rungs that rank trials by where they will end, not where they stand.

A slowly learning configuration (a small learning rate, a shallow tree) can rank last at an
early rung and first at the end, while a fast one that overfits ranks first early and falls
back: on the reference's bank job the first rungs' rankings run against the final one
(benchmarks/results/tuning_reference_replay.md). A forecast sees the slope as well as the
level.

The curve model is pow3, y = a - b * x**(-c), the simplest of the saturating families Domhan,
Springenberg and Hutter (2015) extrapolate learning curves with: it rises (or falls, b < 0)
ever more slowly towards a. For a fixed c it is linear in a and b, so the least-squares fit is
exact for each c of a grid and the best c is kept (variable projection): one vectorised pass,
no iterations that may not converge, tens of microseconds a forecast (a rung decision at
10,000 trials must stay cheap). A forecast more than the observed range beyond the observed
values is cut back to that, so a fit on a few noisy points cannot claim more than the curve
has shown.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scaletune.spec._names import FORECAST_MIN_REPORTS

_EXPONENTS = np.linspace(0.05, 3.0, 60)  # c's grid: from nearly flat decay to a steep one


def forecast(steps: Sequence[int], values: Sequence[float], at: int) -> float | None:
    """The value at step `at` that the (step, value) reports point to; None with fewer than
    FORECAST_MIN_REPORTS reports, or ones that cannot be fitted (a step below 1, a value not
    finite)."""
    if len(steps) < FORECAST_MIN_REPORTS:
        return None
    x = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(y)) or not np.all(x >= 1) or np.unique(x).size < FORECAST_MIN_REPORTS:
        return None
    low, high = float(y.min()), float(y.max())
    if high == low:
        return high  # flat: it stays where it is
    # y = a + s * x**-c for each c: s and a by least squares, in closed form
    basis = x[None, :] ** -_EXPONENTS[:, None]
    centred = basis - basis.mean(axis=1, keepdims=True)
    spread = (centred**2).sum(axis=1)
    slope = centred @ (y - y.mean()) / spread
    offset = y.mean() - slope * basis.mean(axis=1)
    residual = ((offset[:, None] + slope[:, None] * basis - y[None, :]) ** 2).sum(axis=1)
    best = int(np.argmin(residual))
    ahead = offset[best] + slope[best] * float(at) ** -_EXPONENTS[best]
    reach = high - low
    return float(np.clip(ahead, low - reach, high + reach))
