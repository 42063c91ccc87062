"""Model-based proposals for Hyperband, in the spirit of BOHB (Falkner et al. 2018).

Hyperband judges most trials at its low rungs, so a model fitted only on trials that ran to
the end sees few of them, and one fitted on every trial's last value mixes short and long
runs. BOHB fits its model on the highest rung that has enough results (more than the number
of hyperparameters): those values are comparable, and that rung holds more of them than the
rungs above. Here the model is TPE fitted on arrays (`_parzen`: Optuna's univariate rule, 24
candidates a proposal), refitted when a higher rung gets enough results and once a twentieth
of what it was fitted on has changed (every change while that is under 20), so that a
proposal's cost does not grow with the trials. A model fitted on the survivors of a
rung alone has never seen a poor configuration, and rates unexplored regions above the
survivors it calls bad; so the trials that ended below that rung go in too, ranked below
every result at the rung, the furthest first, then by their last rung's value (as Optuna's
TPE ranks pruned trials). The trials on their way to that rung
(running, and past the rung below it; any running trial when it is the lowest rung) are
in its bad group (TPE's constant liar), which keeps new proposals away from them. Counting every
trial not yet at the rung instead would make most of them liars under one-bracket ASHA,
where most trials stop at the first rung, and steer proposals away from the good region. A
third of the proposals are random, as in BOHB, so the model never narrows the search for
good.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from scaletune.spec import ObjectiveType, Range
from scaletune.tuning._sampled import SampledSearcher
from scaletune.tuning._searchers import (
    Config,
    Suggestion,
    TrialResult,
    from_samples,
)


class RungModelSearcher(SampledSearcher):
    def __init__(
        self,
        ranges: Mapping[str, Range],
        objective: ObjectiveType,
        seed: int,
        levels: Sequence[int],
        *,
        random_fraction: float = 1 / 3,
        min_points: int | None = None,
        candidates: int = 24,
        refit_fraction: float = 1 / 20,
        first: Sequence[Config] = (),
    ) -> None:
        super().__init__(ranges, seed, first)
        self._maximize = objective is ObjectiveType.MAXIMIZE
        self._levels = sorted(set(levels))
        self._full = self._levels[-1]
        # BOHB's minimum is d + 1 points; TPE splits them into good and bad, so one more.
        self._min_points = min_points or len(self._ranges) + 2
        self._random_fraction = random_fraction
        self._candidates = candidates
        self._refit_fraction = refit_fraction
        self._coin = np.random.default_rng([seed, 1])
        self._results: dict[int, dict[int, float]] = {level: {} for level in self._levels}
        self._ended: set[int] = set()
        self._model_level: int | None = None
        self._changes = 0  # events that change the model's data since it was fitted
        self._fitted_on = 0

    @property
    def model_level(self) -> int | None:
        """The rung the model is fitted on; None while proposals are all random."""
        return self._model_level

    def suggest(self) -> Suggestion:
        number = len(self._params)
        level = self._level()
        if number < len(self._first):  # tried first, before any model or random draw
            params = dict(self._first[number])
        elif level is None or self._coin.random() < self._random_fraction:
            params = self._random.ask(self._distributions).params
        else:
            stale = self._changes >= max(1, int(self._refit_fraction * self._fitted_on))
            if level != self._model_level or stale:
                self._fit(level)
            assert self._model is not None
            params = self._model.propose(self._draws, self._candidates, self._work)
        self._params[number] = params
        self._changes += 1  # on its way to the lowest rung: pending there
        return Suggestion(number, from_samples(self._ranges, params))

    def on_report(self, number: int, step: int, value: float) -> None:
        at_level = self._results.get(step)
        if at_level is None or number in at_level or number not in self._params:
            return
        at_level[number] = value
        self._changes += 1

    def observe(self, result: TrialResult) -> None:
        # One objective only (the spec refuses more); constraints are not modelled: they
        # judge results only.
        number = result.number
        if result.value is not None and not result.stopped_early:  # ran to its full length
            self._results[self._full].setdefault(number, result.value)
        # Stopped, paused or done: no longer pending. A paused trial promoted later adds its
        # results at the rungs it reaches all the same (`on_report`).
        if number not in self._ended:
            self._ended.add(number)
            self._changes += 1

    def _learn_prior(self, number: int, value: float) -> None:
        self._results[self._full][number] = value

    def _level(self) -> int | None:
        enough = [level for level in self._levels if len(self._results[level]) >= self._min_points]
        return enough[-1] if enough else None

    def _fit(self, level: int) -> None:
        """A model on `level`'s results, the trials that ended below it, and the ones on
        their way to it (in its bad group)."""
        below = self._below(level)
        at_level = self._results[level]
        numbers: list[int] = []
        steps: list[float] = []  # how far each got: inf at the rung, -1 on its way
        losses: list[float] = []
        for number, value in at_level.items():
            numbers.append(number)
            steps.append(math.inf)
            losses.append(-value if self._maximize else value)
        for number in self._params:
            if number in at_level:
                continue
            if number in self._ended:
                reached = [lower for lower in self._levels if lower < level]
                reached = [lower for lower in reached if number in self._results[lower]]
                if not reached:
                    continue  # it failed before any rung: nothing to learn
                value = self._results[reached[-1]][number]
                numbers.append(number)
                steps.append(float(reached[-1]))
                losses.append(-value if self._maximize else value)
            elif below is None or number in self._results[below]:
                numbers.append(number)
                steps.append(-1.0)
                losses.append(0.0)
        self._fit_ranked(numbers, steps, losses, key=level)
        self._model_level = level
        self._changes = 0
        self._fitted_on = len(numbers)

    def _below(self, level: int) -> int | None:
        index = self._levels.index(level)
        return self._levels[index - 1] if index else None
