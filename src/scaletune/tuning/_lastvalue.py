"""Model-based proposals for Hyperband from every trial's latest value (as Syne Tune's BOHB).

Under asynchronous successive halving the trials worth learning from are the ones still
running: the best configurations are the ones promoted furthest, and they are running most
of the time. A model fitted on a rung's finished results (`_multifidelity`) counts those
trials as pending (a constant liar puts them with the bad ones) and learns from them late.
This searcher fits TPE on each trial's latest report instead, running trials included, as
Syne Tune's BOHB does with its KDE: a value further along a curve is a better estimate of its
end, and a trial promoted far has both a high value and a late one.

TPE is Optuna's, independent per hyperparameter. Its multivariate form (what scaletune's
other TPE searchers use) lost to random proposals late in the budget: +0.86 [+0.30, +1.45]
points of regret at the end on all 34 LCBench tasks x 5 seeds
(benchmarks/results/tuning_searcher_model.md). A third of the proposals stay random, as in
BOHB.

TPE keeps, of the candidates it draws from the good configurations' density, the one with
the best ratio of good to bad density. Optuna's 24 candidates put nearly every proposal onto
the best values seen; on a few LCBench tasks that held the search in a poor region, where
random proposals and Syne Tune's BOHB both did better (tuning_lcbench_trailing.md). Eight
keep proposals near the best values but spread them wider. On seeds not used to choose it
(34 tasks x seeds 10..19) eight against 24 is +0.05 / -0.18 / -0.22 points of regret at
25 / 50 / 100 % of the budget, within noise; on 10 held-out seeds (30..39) this searcher is
ahead of random proposals at every checkpoint with 95 % confidence
(tuning_lcbench_all_seeds30to39.md).

Optuna's trials cannot change value, so the model is a study rebuilt from the latest values
once enough of them have changed (a twentieth, five at least): a build costs about 0.1 ms a
trial, so a rebuild on every report would cost a job of n trials n^2; with this rule a build
of m trials follows m / 20 changes, so all builds together cost at most 20 trials' worth a
report: linear in the job's reports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from scaletune.spec import ObjectiveType, Range
from scaletune.tuning._searchers import (
    Config,
    Suggestion,
    from_samples,
    prior_samples,
    to_samples,
)

if TYPE_CHECKING:
    import optuna

FINISHED = math.inf  # the step of a result at full length (a parent job's trial)


class LastValueSearcher:
    def __init__(
        self,
        ranges: Mapping[str, Range],
        objective: ObjectiveType,
        seed: int,
        *,
        random_fraction: float = 1 / 3,
        n_startup: int = 5,
        refit_fraction: float = 1 / 20,
        min_refit: int = 5,
        multivariate: bool = False,  # the measured alternative (the module's docstring)
        candidates: int = 8,  # TPE's draws from l(x) per proposal, the best l(x)/g(x) kept
        first: Sequence[Config] = (),
    ) -> None:
        import optuna
        from optuna.samplers import RandomSampler

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._ranges = dict(ranges)
        self._distributions = {name: r.distribution() for name, r in self._ranges.items()}
        self._maximize = objective is ObjectiveType.MAXIMIZE
        self._seed = seed
        self._random_fraction = random_fraction
        self._n_startup = n_startup
        self._refit_fraction = refit_fraction
        self._min_refit = min_refit
        self._multivariate = multivariate
        self._candidates = candidates
        self._coin = np.random.default_rng([seed, 2])
        self._random = optuna.create_study(sampler=RandomSampler(seed=seed))
        self._params: dict[int, dict[str, object]] = {}  # each trial's values, as sampled
        self._latest: dict[int, tuple[float, float]] = {}  # trial -> (step, value)
        self._failed: set[int] = set()  # left out, whatever they reported (or is replayed)
        self._priors = 0
        self._prior_params: dict[int, dict[str, object]] = {}
        self._first = [to_samples(self._ranges, config) for config in first]
        self._model: optuna.Study | None = None
        self._fits = 0
        self._changes = 0  # latest values changed since the model was built
        self._fitted_on = 0  # how many latest values it was built on

    @property
    def fits(self) -> int:
        """How many times the model has been built (0: proposals are all random so far)."""
        return self._fits

    def latest(self) -> dict[int, float]:
        """Each trial's latest value (priors numbered below zero): what the model learns."""
        return {number: value for number, (_, value) in self._latest.items()}

    def suggest(self) -> Suggestion:
        number = len(self._params)
        if number < len(self._first):  # tried first, before any model or random draw
            params = dict(self._first[number])
        elif len(self._latest) < self._n_startup or self._coin.random() < self._random_fraction:
            params = self._random.ask(self._distributions).params
        else:
            params = self._ask_model()
        self._params[number] = params
        return Suggestion(number, from_samples(self._ranges, params))

    def on_report(self, number: int, step: int, value: float) -> None:
        if number in self._params and number not in self._failed:
            self._update(number, step, value)

    def observe(
        self,
        number: int,
        value: float | None,
        *,
        resource: int | None = None,
        stopped_early: bool = False,
        others: tuple[float, ...] = (),  # one objective only (the spec refuses more)
        violations: tuple[float, ...] = (),  # not modelled: constraints judge results only
    ) -> None:
        if number not in self._params:
            return
        if value is None:  # failed: what it reported says nothing of its configuration
            self._failed.add(number)
            if self._latest.pop(number, None) is not None:
                self._changes += 1
            return
        self._update(number, FINISHED if resource is None else resource, value)

    def restore(
        self,
        number: int,
        config: Config,
        value: float | None,
        *,
        resource: int | None = None,
        stopped_early: bool = False,
        running: bool = False,
        others: tuple[float, ...] = (),
        violations: tuple[float, ...] = (),
    ) -> None:
        """A past trial; the tuning loop then replays every stored report (`on_report`)."""
        if number != len(self._params):
            raise ValueError(f"trial {number} restored out of order")
        self._params[number] = to_samples(self._ranges, config)
        if not running:
            self.observe(number, value, resource=resource, stopped_early=stopped_early)

    def add_prior(self, config: Config, value: float) -> bool:
        """A parent's finished trial, as a full-length result (numbered below zero)."""
        if self._params:
            raise ValueError("priors go in before this job's own trials")
        params = prior_samples(self._ranges, self._distributions, config, value)
        if params is None:
            return False
        self._priors += 1
        self._prior_params[-self._priors] = params
        self._latest[-self._priors] = (FINISHED, value)
        self._changes += 1
        return True

    def _update(self, number: int, step: float, value: float) -> None:
        if not math.isfinite(value):
            return
        known = self._latest.get(number)
        if known is not None and (known[0] > step or known == (step, value)):
            return  # an older report replayed, or the same one again
        self._latest[number] = (step, value)
        self._changes += 1

    def _samples(self, number: int) -> dict[str, object]:
        """A trial's values as sampled; a prior's (numbered below zero) as the parent ran it."""
        return dict(self._params[number] if number >= 0 else self._prior_params[number])

    def _configurations(self) -> list[tuple[Config, float]]:
        """Each trial with a value: its configuration and latest value (for other models)."""
        return [
            (from_samples(self._ranges, self._samples(number)), value)
            for number, (_, value) in self._latest.items()
        ]

    def _ask_model(self) -> dict[str, object]:
        from optuna.trial import TrialState

        if self._model is None or self._changes >= max(
            self._min_refit, int(self._refit_fraction * self._fitted_on)
        ):
            self._model = self._build()
        trial = self._model.ask(self._distributions)
        # A proposal is not a result: failed, it stays out of the model.
        self._model.tell(trial, state=TrialState.FAIL)
        return trial.params

    def _build(self) -> optuna.Study:
        import optuna
        from optuna.samplers import TPESampler

        sampler = TPESampler(
            seed=int(np.random.default_rng([self._seed, 3, self._fits]).integers(2**31)),
            n_startup_trials=0,
            multivariate=self._multivariate,
            n_ei_candidates=self._candidates,
        )
        study = optuna.create_study(
            direction="maximize" if self._maximize else "minimize", sampler=sampler
        )
        study.add_trials(
            [
                optuna.trial.create_trial(
                    params=self._samples(number),
                    distributions=self._distributions,
                    value=value,
                )
                for number, (_, value) in self._latest.items()
            ]
        )
        self._fits += 1
        self._changes = 0
        self._fitted_on = len(self._latest)
        return study
