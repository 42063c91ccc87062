"""What a Hyperband rung records of a trial, and how it ranks what it recorded.

Ranking by forecast (`ForecastValue`, `_forecast`): what a rung records and ranks is not the
trial's value there but the value its reports so far point to at max_resource, so that a slow
learner that will end first is not stopped for standing low early. A rung where the trial has
fewer reports than a curve fit needs judges nothing if a later rung of its bracket will
forecast; where none will (a job of a few steps: rungs at 1 and 3 of 5), the rung ranks the
value itself, or a short job would run every trial to its end.

With several objectives (`ByTradeOff`: quality, billable seconds, wall time), a rung holds
each trial's point: the objective's value there and the other objectives as they stood when
it got there (a reported metric's latest value; the seconds it has run, on all its tasks for
billable seconds). Ranking at a rung is then by random scalarisation, as in multi-objective
ASHA (Schmucker et al. 2021): each trial draws its own trade-off, a weight per objective (from
the seed and its number), and goes on if its Chebyshev distance to the rung's ideal point
(objectives scaled to the rung's range) is among the best max(1, n // eta) of the rung's
points under those weights. Trials judged by different trade-offs survive at different places
along the front, so the survivors spread over it instead of crowding one end; a decision costs
one pass over the rung's points (past SAMPLE of them, over a uniform sample: its cost stays
flat), not a non-dominated sort of them.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from scaletune.analysis._forecast import forecast
from scaletune.analysis._pareto import Direction
from scaletune.spec._names import forecasts_later

Paused = list[tuple[float, int]]  # (value, trial), sorted ascending
# Past this many points a rung ranks a trial against a uniform sample of this many: the
# trade-off's quantile to within about 1 %, at a cost that does not grow with the trials.
SAMPLE = 2048


@dataclasses.dataclass(frozen=True)
class Judged:
    """What a rung records of a trial, and what it was: "forecast " or "" (the value)."""

    value: float
    label: str = ""


class RankedValue(Protocol):
    """What a rung records of a trial: its value there, or a forecast from its curve."""

    def seen(self, trial: int, resource: int, value: float) -> None:
        """A report of a trial that has rungs ahead."""
        ...

    def at_rung(self, trial: int, value: float, *, later: Sequence[int]) -> Judged | None:
        """What its rung records; `later`: the rungs of its bracket after this one. None:
        this rung judges nothing."""
        ...

    def forget(self, trial: int) -> None: ...


class ReportedValue:
    def seen(self, trial: int, resource: int, value: float) -> None:
        pass

    def at_rung(self, trial: int, value: float, *, later: Sequence[int]) -> Judged | None:
        return Judged(value)

    def forget(self, trial: int) -> None:
        pass


class ForecastValue:
    def __init__(self, max_resource: int) -> None:
        self._max_resource = max_resource
        # trial -> its (steps, values) so far, while it has rungs ahead
        self.curves: dict[int, tuple[list[int], list[float]]] = {}

    def seen(self, trial: int, resource: int, value: float) -> None:
        steps, values = self.curves.setdefault(trial, ([], []))
        kept = bisect.bisect_left(steps, resource)  # a resumed attempt reports anew
        del steps[kept:], values[kept:]
        steps.append(resource)
        values.append(value)

    def at_rung(self, trial: int, value: float, *, later: Sequence[int]) -> Judged | None:
        curve = self.curves[trial]
        if not later:  # the curve is not needed again
            del self.curves[trial]
        ahead = forecast(*curve, at=self._max_resource)
        if ahead is not None:
            return Judged(ahead, "forecast ")
        return None if forecasts_later(later) else Judged(value)

    def forget(self, trial: int) -> None:
        self.curves.pop(trial, None)


class Ranking(Protocol):
    """Whether a trial is among a rung's best `keep`; each rung's records are its own."""

    def add(self, rung: tuple[int, int], trial: int, value: float, others: Sequence[float]) -> None:
        """A trial recorded at a rung (bracket, step): `value` ranked, `others` as they stood."""
        ...

    def passes(
        self, rung: tuple[int, int], values: list[float], trial: int, value: float, keep: int
    ) -> bool:
        """Among the best `keep` of the rung, whose recorded `values` are sorted ascending."""
        ...

    def candidates(self, paused: Paused) -> Paused:
        """The paused trials of a rung worth asking about a promotion, in order."""
        ...


class ByValue:
    """One objective: the value, in its direction (the one place that knows it)."""

    def __init__(self, maximize: bool) -> None:
        self._maximize = maximize

    def add(self, rung: tuple[int, int], trial: int, value: float, others: Sequence[float]) -> None:
        pass  # the values the rung recorded are all it ranks

    def passes(
        self, rung: tuple[int, int], values: list[float], trial: int, value: float, keep: int
    ) -> bool:
        return value >= values[-keep] if self._maximize else value <= values[keep - 1]

    def candidates(self, paused: Paused) -> Paused:
        return [paused[-1] if self._maximize else paused[0]]  # the best is the one to try


class _Points:
    """A rung's points (every objective as one to minimise), in a growing array, with what a
    ranking needs kept up as points come: each objective's finite range, and past SAMPLE
    points a uniform sample of them (a reservoir), so that a ranking costs one vectorised
    pass over at most SAMPLE rows however many trials reached the rung."""

    def __init__(self, width: int, rng: np.random.Generator) -> None:
        self._rows = np.empty((16, width))
        self._count = 0
        self._index: dict[int, int] = {}  # trial -> its row
        self._low = np.full(width, np.inf)  # each objective's finite range so far
        self._high = np.full(width, -np.inf)
        self._sample = np.empty((0, width))
        self._rng = rng

    def add(self, trial: int, point: np.ndarray) -> None:
        if self._count == len(self._rows):
            self._rows = np.concatenate([self._rows, np.empty_like(self._rows)])
        self._rows[self._count] = point
        self._index[trial] = self._count
        self._count += 1
        finite = np.isfinite(point)
        self._low = np.where(finite, np.minimum(self._low, point), self._low)
        self._high = np.where(finite, np.maximum(self._high, point), self._high)
        if self._count == SAMPLE:
            self._sample = self._rows[:SAMPLE].copy()
        elif self._count > SAMPLE:  # Algorithm R: each point kept with chance SAMPLE / n
            slot = int(self._rng.integers(self._count))
            if slot < SAMPLE:
                self._sample[slot] = point

    def of(self, trial: int) -> np.ndarray:
        return np.asarray(self._rows[self._index[trial]])

    @property
    def count(self) -> int:
        return self._count

    @property
    def array(self) -> np.ndarray:
        return self._rows[: self._count]

    @property
    def ranked_against(self) -> np.ndarray:
        """Every point up to SAMPLE of them, else the uniform sample."""
        return self.array if self._count <= SAMPLE else self._sample

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Each objective's lowest and highest finite value (0 where none is finite)."""
        low, high = self._low, self._high
        return np.where(np.isfinite(low), low, 0.0), np.where(np.isfinite(high), high, 0.0)


class ByTradeOff:
    """Several objectives: each trial by its own random trade-off (module doc)."""

    def __init__(self, objectives: Sequence[Direction], seed: int) -> None:
        self._objectives = list(objectives)
        self._seed = seed
        self._trade_offs: dict[int, np.ndarray] = {}  # trial -> its weight per objective
        self._points: dict[tuple[int, int], _Points] = {}

    def add(self, rung: tuple[int, int], trial: int, value: float, others: Sequence[float]) -> None:
        points = self._points.get(rung)
        if points is None:
            rng = np.random.default_rng([self._seed, *rung, 11])  # the rung's sample's draws
            points = self._points[rung] = _Points(len(self._objectives), rng)
        points.add(trial, self._minimised(value, others))

    def passes(
        self, rung: tuple[int, int], values: list[float], trial: int, value: float, keep: int
    ) -> bool:
        points = self._points[rung]
        low, high = points.bounds
        span = np.where(high > low, high - low, 1.0)
        weights = self._trade_off(trial)

        def distance(rows: np.ndarray) -> np.ndarray:
            scaled = np.where(np.isfinite(rows), (rows - low) / span, 1.0)  # unknown: worst
            return np.asarray((scaled * weights).max(axis=-1))

        against = points.ranked_against
        better = int((distance(against) < distance(points.of(trial))).sum())
        # Among the best `keep` of n: fewer than keep better, or, ranked against a sample of
        # m, fewer than keep * m / n of it better.
        return better * points.count < keep * len(against)

    def candidates(self, paused: Paused) -> Paused:
        return paused  # each judged by its own trade-off

    def points_at(self, rung: tuple[int, int]) -> np.ndarray:
        """The points recorded at a rung (bracket, step), a row per trial, every objective
        as one to minimise."""
        return self._points[rung].array

    def _minimised(self, value: float, others: Sequence[float]) -> np.ndarray:
        """A point with every objective to minimise; one not known yet counts as the worst."""
        raw = [value, *others][: len(self._objectives)]
        raw += [math.nan] * (len(self._objectives) - len(raw))
        point = np.array(
            [-v if d.maximize else v for v, d in zip(raw, self._objectives, strict=True)]
        )
        return np.where(np.isnan(point), np.inf, point)

    def _trade_off(self, trial: int) -> np.ndarray:
        if trial not in self._trade_offs:
            rng = np.random.default_rng([self._seed, trial, 7])
            self._trade_offs[trial] = rng.dirichlet(np.ones(len(self._objectives)))
        return self._trade_offs[trial]
