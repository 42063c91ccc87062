"""Hyperband's brackets as the tuner keeps them: the weights each is drawn with, fixed or
adapted to its rungs (the layout and the draw are `analysis._layout`'s).

Adaptive bracket weights (Hyper-Tune's idea, Li et al. 2022): a bracket pays off when the
ranking at its first rung predicts the ranking at max_resource; when it does not, its early
verdicts are coin flips that waste its trials. So each bracket's Hyperband weight is scaled by
Kendall's tau (`analysis.kendall_tau`, tau-b) between the values its first rung saw and the
final values, over the (latest 200) trials that reported both, once there are 8 such trials
(before that, and for the last bracket, which judges nothing early, the weight is Hyperband's).
A tau at or below 0 leaves a bracket 5 % of its weight, so it can still show that it became
useful.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from scaletune.analysis._kendall import kendall_tau
from scaletune.analysis._layout import draw_bracket, hyperband_brackets
from scaletune.spec import BracketWeights

_RECENT = 200  # trials that reached max_resource, the latest first, that the tau is taken over
_MIN_PAIRS = 8  # trials with both values before a bracket's weight moves
_FLOOR = 0.05  # what a bracket whose first rung ranks nothing keeps of its weight


class Weights(Protocol):
    def measure(self, trial: int, resource: int, value: float) -> None:
        """A report: what the weights learn from, if anything."""
        ...

    def now(self) -> np.ndarray:
        """The chance of drawing each bracket now."""
        ...


class HyperbandWeights:
    """Hyperband's own weights, fixed."""

    def __init__(self, weights: np.ndarray) -> None:
        self._weights = weights

    def measure(self, trial: int, resource: int, value: float) -> None:
        pass

    def now(self) -> np.ndarray:
        return self._weights


class AdaptiveWeights:
    """Hyperband's weights scaled by how well each bracket's first rung ranks (module doc)."""

    def __init__(self, weights: np.ndarray, rungs: list[list[int]], max_resource: int) -> None:
        self._weights = weights
        self._max_resource = max_resource
        self._first_rungs = {r[0]: b for b, r in enumerate(rungs) if r}  # step -> bracket
        self._at_first_rungs: dict[int, dict[int, float]] = {}  # trial -> step -> value
        self._finals: dict[int, float] = {}  # trial -> value at max_resource, in order
        self._adapted: tuple[int, np.ndarray] | None = None  # (finals then, weights)

    def measure(self, trial: int, resource: int, value: float) -> None:
        """What the weights need: values at first rungs, and final values."""
        if resource >= self._max_resource:
            self._finals.setdefault(trial, value)
        elif resource in self._first_rungs:
            self._at_first_rungs.setdefault(trial, {}).setdefault(resource, value)

    def now(self) -> np.ndarray:
        if len(self._finals) < _MIN_PAIRS:
            return self._weights
        if self._adapted is not None and self._adapted[0] == len(self._finals):
            return self._adapted[1]
        recent = list(self._finals)[-_RECENT:]
        weights = self._weights.copy()
        for step, number in self._first_rungs.items():
            pairs = [
                (self._at_first_rungs[t][step], self._finals[t])
                for t in recent
                if step in self._at_first_rungs.get(t, {})
            ]
            if len(pairs) >= _MIN_PAIRS:
                early, final = np.asarray(pairs).T
                weights[number] *= max(kendall_tau(early, final) or 0.0, _FLOOR)
        weights /= weights.sum()
        self._adapted = (len(self._finals), weights)
        return weights


class Brackets:
    """A Hyperband job's brackets (their rungs) and each trial's, drawn at its first report."""

    def __init__(
        self,
        *,
        min_resource: int,
        max_resource: int,
        eta: int,
        seed: int,
        count: int | None = None,
        weights: BracketWeights = "hyperband",
    ) -> None:
        self.rungs, base = hyperband_brackets(min_resource, max_resource, eta, count)
        self.weights: Weights = (
            AdaptiveWeights(base, self.rungs, max_resource)
            if weights == "adaptive"
            else HyperbandWeights(base)
        )
        self._seed = seed
        self._drawn: dict[int, int] = {}

    def of(self, trial: int) -> int:
        """The trial's bracket, drawn now if it has none yet."""
        if trial not in self._drawn:
            self._drawn[trial] = draw_bracket(self._seed, trial, self.weights.now())
        return self._drawn[trial]

    def drawn(self, trial: int) -> int | None:
        """The trial's bracket, once drawn (at its first report)."""
        return self._drawn.get(trial)
