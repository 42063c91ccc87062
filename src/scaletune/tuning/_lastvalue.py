"""Model-based proposals for Hyperband from every trial's latest value (as Syne Tune's BOHB):
the data every such model learns from (`LatestValuesSearcher`), and TPE on them
(`LastValueSearcher`; conformalized quantile regression is `_quantile`'s).

Under asynchronous successive halving the trials worth learning from are the ones still
running: the best configurations are the ones promoted furthest, and they are running most
of the time. A model fitted on a rung's finished results (`_multifidelity`) counts those
trials as pending and learns from them late. This searcher fits TPE on each trial's latest
report instead, running trials included: a value further along a curve is a better estimate
of its end, and a trial promoted far has both a high value and a late one.

The model is TPE independent per hyperparameter, with eight candidates a proposal, and a
third of the proposals stay random, as in BOHB (why these: benchmarks/README.md). It is fitted
on arrays (`_parzen`) and refitted once enough latest values have changed (a twentieth, five
at least): a fit of m trials follows m / 20 changes, so fits cost a bounded amount a report,
and a proposal's work does not grow with the number of trials.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

import numpy as np

from scaletune.spec import ObjectiveType, Range
from scaletune.tuning._parzen import ParzenModel
from scaletune.tuning._sampled import SampledSearcher
from scaletune.tuning._searchers import (
    Config,
    Suggestion,
    TrialResult,
    from_samples,
)

FINISHED = math.inf  # the step of a result at full length (a parent job's trial)
TPE_RANDOM_FRACTION = 1 / 3  # of the proposals once there is a model, as BOHB's
TPE_CANDIDATES = 8  # TPE's draws from l(x) per proposal, the best l(x)/g(x) kept


class LatestValuesSearcher(SampledSearcher, ABC):
    """Each trial's latest value, running trials included, as a model's arrays (a row a
    trial), with when to refit; proposals random until `n_startup` trials have a value and
    for `random_fraction` of them after, the model's (`_ask_model`) otherwise."""

    def __init__(
        self,
        ranges: Mapping[str, Range],
        objective: ObjectiveType,
        seed: int,
        *,
        random_fraction: float,
        n_startup: int = 5,
        refit_fraction: float = 1 / 20,
        min_refit: int = 5,
        first: Sequence[Config] = (),
    ) -> None:
        super().__init__(ranges, seed, first)
        self._maximize = objective is ObjectiveType.MAXIMIZE
        self._random_fraction = random_fraction
        self._n_startup = n_startup
        self._refit_fraction = refit_fraction
        self._min_refit = min_refit
        self._coin = np.random.default_rng([seed, 2])
        self._latest: dict[int, tuple[float, float]] = {}  # trial -> (step, value)
        self._failed: set[int] = set()  # left out, whatever they reported (or is replayed)
        # The model's data: a row a trial, in the order their first values came.
        self._rows: dict[int, int] = {}
        self._points = np.empty((64, len(self._axes)))  # each hyperparameter, as TPE sees it
        self._values = np.empty(64)  # the latest value; NaN once a trial is left out
        self._changes = 0  # latest values changed since the model was fitted
        self._fitted_on = 0  # how many latest values it was fitted on

    def latest(self) -> dict[int, float]:
        """Each trial's latest value (priors numbered below zero): what the model learns."""
        return {number: value for number, (_, value) in self._latest.items()}

    def suggest(self) -> Suggestion:
        number = len(self._params)
        if number < len(self._first):  # tried first, before any model or random draw
            params = dict(self._first[number])
        elif (
            len(self._latest) < self._n_startup
            or self._coin.random() < self._share_of_random_proposals()
        ):
            params = self._random.ask(self._distributions).params
        else:
            params = self._ask_model()
        self._params[number] = params
        return Suggestion(number, from_samples(self._ranges, params))

    def on_report(self, number: int, step: int, value: float) -> None:
        if number in self._params and number not in self._failed:
            self._update(number, step, value)

    def observe(self, result: TrialResult) -> None:
        # One objective only (the spec refuses more); constraints are not modelled: they
        # judge results only.
        number, value = result.number, result.value
        if number not in self._params:
            return
        if value is None:  # failed: what it reported says nothing of its configuration
            self._failed.add(number)
            if self._latest.pop(number, None) is not None:
                self._values[self._rows[number]] = math.nan
                self._changes += 1
            return
        self._update(number, FINISHED if result.resource is None else result.resource, value)

    def _learn_prior(self, number: int, value: float) -> None:
        self._update(number, FINISHED, value)

    def _update(self, number: int, step: float, value: float) -> None:
        if not math.isfinite(value):
            return
        known = self._latest.get(number)
        if known is not None and (known[0] > step or known == (step, value)):
            return  # an older report replayed, or the same one again
        self._latest[number] = (step, value)
        row = self._row(number)  # first: it may grow the arrays
        self._values[row] = value
        self._changes += 1

    def _row(self, number: int) -> int:
        row = self._rows.get(number)
        if row is None:
            row = self._rows[number] = len(self._rows)
            if row == len(self._values):  # full: twice the room
                self._points = np.concatenate([self._points, np.empty_like(self._points)])
                self._values = np.concatenate([self._values, np.empty_like(self._values)])
            samples = self._samples(number)
            self._points[row] = [axis.internal(samples[n]) for n, axis in self._axes.items()]
        return row

    def _configurations(self) -> list[tuple[Config, float]]:
        """Each trial with a value: its configuration and latest value (for other models)."""
        return [
            (from_samples(self._ranges, self._samples(number)), value)
            for number, (_, value) in self._latest.items()
        ]

    def _share_of_random_proposals(self) -> float:
        return self._random_fraction

    def _ask_parzen(self, candidates: int) -> dict[str, object]:
        """TPE's proposal on the latest values, the best of `candidates` draws from l(x), the
        model fitted again first if it is stale."""
        if self._model is None or self._model_is_stale():
            live, losses = self._live()
            self._model = ParzenModel(self._axes, self._points[live], losses)
            self._draws = np.random.RandomState(self._fitted())
        return self._model.propose(self._draws, candidates, self._work)

    def _model_is_stale(self) -> bool:
        return self._changes >= max(self._min_refit, int(self._refit_fraction * self._fitted_on))

    def _fitted(self) -> int:
        """Counts a fit of the latest values; the seed of its draws."""
        seed = int(np.random.default_rng([self._seed, 3, self._fits]).integers(2**31))
        self._fits += 1
        self._changes = 0
        self._fitted_on = len(self._latest)
        self._work.fitted_values += len(self._latest)
        return seed

    def _live(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows with a value (their indices), and their losses (the direction applied)."""
        live = np.flatnonzero(~np.isnan(self._values[: len(self._rows)]))
        values = self._values[live]
        return live, -values if self._maximize else values

    @abstractmethod
    def _ask_model(self) -> dict[str, object]:
        """A configuration from the model, fitted again first if it is stale."""


class LastValueSearcher(LatestValuesSearcher):
    """TPE on the latest values (module doc)."""

    def __init__(
        self,
        ranges: Mapping[str, Range],
        objective: ObjectiveType,
        seed: int,
        *,
        random_fraction: float = TPE_RANDOM_FRACTION,
        n_startup: int = 5,
        refit_fraction: float = 1 / 20,
        min_refit: int = 5,
        candidates: int = TPE_CANDIDATES,
        first: Sequence[Config] = (),
    ) -> None:
        super().__init__(
            ranges,
            objective,
            seed,
            random_fraction=random_fraction,
            n_startup=n_startup,
            refit_fraction=refit_fraction,
            min_refit=min_refit,
            first=first,
        )
        self._candidates = candidates

    def _ask_model(self) -> dict[str, object]:
        return self._ask_parzen(self._candidates)
