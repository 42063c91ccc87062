"""Bayesian optimisation of one objective: TPE on every ended trial's result, fitted on arrays.

The rule is Optuna's TPE (`_parzen`: its good and bad groups, weights, bandwidths, prior, 24
candidates a proposal), independent per hyperparameter, fitted without a study to rebuild:
an Optuna study copies every trial at each proposal, so its cost a trial grew with the
trials (41 ms a trial at 10,000). The model is refitted once a twentieth of its results are
new (every result while there are fewer than 20), so fits cost a bounded amount a trial.

As Optuna ranks them, a trial stopped early (median stopping, Hyperband) ranks below every
complete one, the furthest first, then by its value; a failed one is left out. The trials
still running are in the bad group when the model is fitted (Optuna's constant liar), so
parallel proposals keep apart from them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from scaletune.spec import ObjectiveType, Range
from scaletune.tuning._sampled import SampledSearcher
from scaletune.tuning._searchers import Config, Suggestion, TrialResult, from_samples

FINISHED = math.inf  # the step of a complete result: above every stopped one


class ParzenSearcher(SampledSearcher):
    def __init__(
        self,
        ranges: Mapping[str, Range],
        objective: ObjectiveType,
        seed: int,
        *,
        n_startup: int = 10,
        candidates: int = 24,
        refit_fraction: float = 1 / 20,
        first: Sequence[Config] = (),
    ) -> None:
        super().__init__(ranges, seed, first)
        self._maximize = objective is ObjectiveType.MAXIMIZE
        self._n_startup = n_startup
        self._candidates = candidates
        self._refit_fraction = refit_fraction
        # Each result: (trial, step reached, loss), the direction applied once, here.
        self._results: dict[int, tuple[float, float]] = {}
        self._pending: set[int] = set()  # proposed, not ended: the constant liar's
        self._changes = 0  # results since the model was fitted
        self._fitted_on = 0

    def suggest(self) -> Suggestion:
        number = len(self._params)
        if number < len(self._first):  # tried first, before any model or random draw
            params = dict(self._first[number])
        elif len(self._results) < self._n_startup:
            params = self._random.ask(self._distributions).params
        else:
            params = self._ask_model()
        self._params[number] = params
        self._pending.add(number)
        return Suggestion(number, from_samples(self._ranges, params))

    def on_report(self, number: int, step: int, value: float) -> None:
        pass  # it learns from results, not from the way there

    def observe(self, result: TrialResult) -> None:
        number, value = result.number, result.value
        if number not in self._params:
            return
        self._pending.discard(number)
        if value is None or not math.isfinite(value):  # failed: left out
            if self._results.pop(number, None) is not None:
                self._changes += 1
            return
        step = float(result.resource or 0) if result.stopped_early else FINISHED
        self._results[number] = (step, -value if self._maximize else value)
        self._changes += 1

    def restore(self, number: int, config: Config, ended: TrialResult | None) -> None:
        super().restore(number, config, ended)
        if ended is None:  # it goes on: running, as it was
            self._pending.add(number)

    def _learn_prior(self, number: int, value: float) -> None:
        self._results[number] = (FINISHED, -value if self._maximize else value)
        self._changes += 1

    def _ask_model(self) -> dict[str, object]:
        stale = self._changes >= max(1, int(self._refit_fraction * self._fitted_on))
        if self._model is None or stale:
            self._fit()
        assert self._model is not None
        return self._model.propose(self._draws, self._candidates, self._work)

    def _fit(self) -> None:
        numbers = sorted(self._results) + sorted(self._pending)  # priors first, then in order
        steps = [self._results[n][0] if n in self._results else -1.0 for n in numbers]
        losses = [self._results[n][1] if n in self._results else 0.0 for n in numbers]
        self._fit_ranked(numbers, steps, losses, key=4)
        self._changes = 0
        self._fitted_on = len(self._results)
