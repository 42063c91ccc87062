"""Model-based proposals for Hyperband, in the spirit of BOHB (Falkner et al. 2018).

Hyperband judges most trials at its low rungs, so a model fitted only on trials that ran to
the end sees few of them, and one fitted on every trial's last value mixes short and long
runs. BOHB fits its model on the highest rung that has enough results (more than the number
of hyperparameters): those values are comparable, and that rung holds more of them than the
rungs above. Here the model is Optuna's TPE (multivariate), rebuilt when a higher rung gets
enough results and told each new result at its rung. A model fitted on the survivors of a
rung alone has never seen a poor configuration, and rates unexplored regions above the
survivors it calls bad; so the trials that ended below that rung go in too, as pruned trials
with their last rung's value (Optuna's TPE ranks those below every complete one, by how far
they got). The trials on their way to that rung
(running, and past the rung below it; any running trial when it is the lowest rung) are
pending trials in it, which TPE's constant liar keeps new proposals away from. Counting every
trial not yet at the rung instead would make most of them liars under one-bracket ASHA,
where most trials stop at the first rung, and steer proposals away from the good region. A
third of the proposals are random, as in BOHB, so the model never narrows the search for
good.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from scaletune.spec import ObjectiveType, Range
from scaletune.tuning._sampled import SampledSearcher
from scaletune.tuning._searchers import (
    Config,
    Suggestion,
    TrialResult,
    from_samples,
)

if TYPE_CHECKING:
    import optuna


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
        first: Sequence[Config] = (),
    ) -> None:

        super().__init__(ranges, seed, first)
        self._objective = objective
        self._levels = sorted(set(levels))
        self._full = self._levels[-1]
        # BOHB's minimum is d + 1 points; TPE splits them into good and bad, so one more.
        self._min_points = min_points or len(self._ranges) + 2
        self._random_fraction = random_fraction
        self._coin = np.random.default_rng([seed, 1])
        self._results: dict[int, dict[int, float]] = {level: {} for level in self._levels}
        self._ended: set[int] = set()
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
        if number < len(self._first):  # tried first, before any model or random draw
            params = dict(self._first[number])
        elif level is None or self._coin.random() < self._random_fraction:
            params = self._random.ask(self._distributions).params
        else:
            if level != self._model_level:
                self._fit(level)
            assert self._model is not None
            trial = self._model.ask(self._distributions)
            params = trial.params
            if level == self._levels[0]:
                self._pending[number] = trial  # on its way to the model's rung already
            else:
                self._forget(trial)  # pending once it passes the rung below
        self._params[number] = params
        config = from_samples(self._ranges, params)
        return Suggestion(number, config)

    def on_report(self, number: int, step: int, value: float) -> None:
        at_level = self._results.get(step)
        if at_level is None or number in at_level or number not in self._params:
            return
        at_level[number] = value
        if self._model is None or self._model_level is None:
            return
        if step == self._model_level and number in self._pending:
            self._model.tell(self._pending.pop(number), value)
        elif step == self._below(self._model_level) and number not in self._pending:
            self._add_pending(number)

    def observe(self, result: TrialResult) -> None:
        # One objective only (the spec refuses more); constraints are not modelled: they
        # judge results only.
        number = result.number
        if result.value is not None and not result.stopped_early:  # ran to its full length
            self._results[self._full].setdefault(number, result.value)
        # Stopped, paused or done: no longer pending. A paused trial promoted later adds its
        # results at the rungs it reaches all the same (`on_report`).
        if number in self._ended:
            return
        self._ended.add(number)
        self._drop_pending(number)
        if self._model is not None and self._model_level is not None:
            self._add_fallen(number, self._model_level)

    def _learn_prior(self, number: int, value: float) -> None:
        self._results[self._full][number] = value

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
        self._model, self._model_level, self._pending = model, level, {}
        below = self._below(level)
        for number in self._params:
            if number in self._ended:
                self._add_fallen(number, level)
            elif below is None or number in self._results[below]:
                self._add_pending(number)

    def _add_fallen(self, number: int, level: int) -> None:
        """A trial that ended below the model's rung: pruned, at the last rung it reached."""
        import optuna
        from optuna.trial import TrialState

        assert self._model is not None
        if number in self._results[level]:
            return
        reached = [
            lower for lower in self._levels if lower < level and number in self._results[lower]
        ]
        if not reached:
            return  # it failed before any rung: nothing to learn
        self._model.add_trial(
            optuna.trial.create_trial(
                params=dict(self._params[number]),
                distributions=self._distributions,
                state=TrialState.PRUNED,
                intermediate_values={reached[-1]: self._results[reached[-1]][number]},
            )
        )

    def _below(self, level: int) -> int | None:
        index = self._levels.index(level)
        return self._levels[index - 1] if index else None

    def _add_pending(self, number: int) -> None:
        """A trial on its way to the model's rung: a pending trial in the model."""
        assert self._model is not None and self._model_level is not None
        if number in self._ended or number in self._results[self._model_level]:
            return
        self._model.enqueue_trial(dict(self._params[number]), skip_if_exists=False)
        self._pending[number] = self._model.ask(self._distributions)

    def _forget(self, trial: optuna.Trial) -> None:
        from optuna.trial import TrialState

        assert self._model is not None
        self._model.tell(trial, state=TrialState.FAIL)

    def _drop_pending(self, number: int) -> None:
        trial = self._pending.pop(number, None)
        if trial is not None:
            self._forget(trial)  # it never reached the model's rung
