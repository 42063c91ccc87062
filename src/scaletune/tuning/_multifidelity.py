"""Model-based proposals for Hyperband, in the spirit of BOHB (Falkner et al. 2018).

Hyperband judges most trials at its low rungs, so a model fitted only on trials that ran to
the end sees few of them, and one fitted on every trial's last value mixes short and long
runs. BOHB fits its model on the highest rung that has enough results (more than the number
of hyperparameters): those values are comparable, and that rung holds more of them than the
rungs above. Here the model is Optuna's TPE (multivariate), rebuilt when a higher rung gets
enough results and told each new result at its rung; trials proposed and not yet judged at
that rung (running or paused below it) are pending trials in it, which TPE's constant liar
keeps new proposals away from. A third of the proposals are random, as in BOHB, so the model
never narrows the search for good.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from scaletune.spec import ObjectiveType, Range
from scaletune.tuning._searchers import Config, Suggestion, from_samples, to_samples

if TYPE_CHECKING:
    import optuna


class RungModelSearcher:
    def __init__(
        self,
        ranges: Mapping[str, Range],
        objective: ObjectiveType,
        seed: int,
        levels: Sequence[int],
        *,
        random_fraction: float = 1 / 3,
        min_points: int | None = None,
    ) -> None:
        import optuna
        from optuna.samplers import RandomSampler

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._ranges = dict(ranges)
        self._distributions = {name: r.distribution() for name, r in self._ranges.items()}
        self._objective = objective
        self._seed = seed
        self._levels = sorted(set(levels))
        self._full = self._levels[-1]
        # BOHB's minimum is d + 1 points; TPE splits them into good and bad, so one more.
        self._min_points = min_points or len(self._ranges) + 2
        self._random_fraction = random_fraction
        self._coin = np.random.default_rng([seed, 1])
        self._random = optuna.create_study(sampler=RandomSampler(seed=seed))
        self._params: dict[int, dict[str, object]] = {}  # each trial's values, as sampled
        self._results: dict[int, dict[int, float]] = {level: {} for level in self._levels}
        self._ended: set[int] = set()
        self._priors = 0
        self._prior_params: dict[int, dict[str, object]] = {}
        self._model: optuna.Study | None = None
        self._model_level: int | None = None
        self._pending: dict[int, optuna.Trial] = {}  # in the model, not yet at its level

    @property
    def model_level(self) -> int | None:
        """The rung the model is fitted on; None while proposals are all random."""
        return self._model_level

    def suggest(self) -> Suggestion:
        number = len(self._params)
        level = self._level()
        if level is None or self._coin.random() < self._random_fraction:
            params = self._random.ask(self._distributions).params
        else:
            if level != self._model_level:
                self._fit(level)
            assert self._model is not None
            trial = self._model.ask(self._distributions)
            self._pending[number] = trial
            params = trial.params
        self._params[number] = params
        config = from_samples(self._ranges, params)
        return Suggestion(number, config)

    def on_report(self, number: int, step: int, value: float) -> None:
        at_level = self._results.get(step)
        if at_level is None or number in at_level or number not in self._params:
            return
        at_level[number] = value
        if step == self._model_level and number in self._pending:
            assert self._model is not None
            self._model.tell(self._pending.pop(number), value)

    def observe(
        self,
        number: int,
        value: float | None,
        *,
        resource: int | None = None,
        stopped_early: bool = False,
    ) -> None:
        if value is not None and not stopped_early:  # ran to its end: a full-length result
            self._results[self._full].setdefault(number, value)
        # Stopped, paused or done: no longer pending. A paused trial promoted later adds its
        # results at the rungs it reaches all the same (`on_report`).
        self._ended.add(number)
        self._drop_pending(number)

    def restore(
        self,
        number: int,
        config: Config,
        value: float | None,
        *,
        resource: int | None = None,
        stopped_early: bool = False,
        running: bool = False,
    ) -> None:
        if number != len(self._params):
            raise ValueError(f"trial {number} restored out of order")
        self._params[number] = to_samples(self._ranges, config)
        if not running:
            self.observe(number, value, resource=resource, stopped_early=stopped_early)

    def add_prior(self, config: Config, value: float) -> bool:
        """A parent's finished trial, as a full-length result (numbered below zero)."""
        if self._params:
            raise ValueError("priors go in before this job's own trials")
        if any(name not in config for name in self._ranges):
            return False
        params = to_samples(self._ranges, config)
        import optuna

        try:  # checks each value against its range
            optuna.trial.create_trial(params=params, distributions=self._distributions, value=value)
        except ValueError:
            return False
        self._priors += 1
        self._prior_params[-self._priors] = dict(params)
        self._results[self._full][-self._priors] = value
        return True

    def _level(self) -> int | None:
        enough = [level for level in self._levels if len(self._results[level]) >= self._min_points]
        return enough[-1] if enough else None

    def _fit(self, level: int) -> None:
        """A new model on `level`'s results; the trials not yet judged there are pending."""
        import optuna
        from optuna.samplers import TPESampler
        from optuna.study import StudyDirection

        direction = (
            StudyDirection.MAXIMIZE
            if self._objective is ObjectiveType.MAXIMIZE
            else StudyDirection.MINIMIZE
        )
        sampler = TPESampler(
            seed=int(np.random.default_rng([self._seed, level]).integers(2**31)),
            n_startup_trials=0,
            multivariate=True,
            constant_liar=True,
        )
        model = optuna.create_study(direction=direction, sampler=sampler)
        for number, value in self._results[level].items():
            params = self._params.get(number) or self._prior_params[number]
            model.add_trial(
                optuna.trial.create_trial(
                    params=dict(params), distributions=self._distributions, value=value
                )
            )
        self._pending = {}
        for number, params in self._params.items():
            if number not in self._ended and number not in self._results[level]:
                model.enqueue_trial(dict(params), skip_if_exists=False)
                self._pending[number] = model.ask(self._distributions)
        self._model, self._model_level = model, level

    def _drop_pending(self, number: int) -> None:
        trial = self._pending.pop(number, None)
        if trial is not None:
            from optuna.trial import TrialState

            assert self._model is not None
            self._model.tell(trial, state=TrialState.FAIL)  # it never reached the model's rung
