"""What the searchers that fit TPE on arrays share (`_lastvalue`, `_multifidelity`,
`_bayesian`): each trial's values as sampled, the first configurations and random draws before
a model, a parent job's trials as priors numbered below zero, a restore that replays past
trials, and the model's axes, fits and work."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from scaletune.spec import Range
from scaletune.tuning._parzen import ParzenModel, Work, axis_for
from scaletune.tuning._searchers import Config, TrialResult, prior_samples, to_samples


class SampledSearcher:
    def __init__(self, ranges: Mapping[str, Range], seed: int, first: Sequence[Config]) -> None:
        import optuna
        from optuna.samplers import RandomSampler

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._ranges = dict(ranges)
        self._distributions = {name: r.distribution() for name, r in self._ranges.items()}
        self._seed = seed
        self._random = optuna.create_study(sampler=RandomSampler(seed=seed))
        self._params: dict[int, dict[str, object]] = {}  # each trial's values, as sampled
        self._priors = 0
        self._prior_params: dict[int, dict[str, object]] = {}
        self._first = [to_samples(self._ranges, config) for config in first]
        self._axes = {name: axis_for(d) for name, d in self._distributions.items()}
        self._model: ParzenModel | None = None
        self._draws = np.random.RandomState()  # a fitted model's proposals' draws
        self._work = Work()
        self._fits = 0

    @property
    def fits(self) -> int:
        """How many times the model has been fitted (0: proposals are all random so far)."""
        return self._fits

    @property
    def work(self) -> Work:
        return self._work

    def _samples(self, number: int) -> dict[str, object]:
        """A trial's values as sampled; a prior's (numbered below zero) as the parent ran it."""
        return dict(self._params[number] if number >= 0 else self._prior_params[number])

    def _fit_ranked(
        self, numbers: Sequence[int], steps: Sequence[float], losses: Sequence[float], key: int
    ) -> None:
        """Fit the model on these trials in Optuna's order: the complete ones (step inf) by
        loss, then the stopped ones the furthest first, then by loss, and the running ones
        (step -1, the constant liar's) last; by rank, as the model only compares them. Its
        draws are seeded by `key` and the count of fits."""
        order = np.lexsort((np.asarray(losses), -np.asarray(steps)))
        ranks = np.empty(len(numbers))
        ranks[order] = np.arange(len(numbers))
        points = np.array(
            [
                [axis.internal(self._samples(n)[name]) for name, axis in self._axes.items()]
                for n in numbers
            ]
        ).reshape(len(numbers), len(self._axes))
        self._model = ParzenModel(self._axes, points, ranks)
        self._draws = np.random.RandomState(
            int(np.random.default_rng([self._seed, key, self._fits]).integers(2**31))
        )
        self._fits += 1
        self._work.fitted_values += len(numbers)

    def observe(self, result: TrialResult) -> None:
        raise NotImplementedError

    def _learn_prior(self, number: int, value: float) -> None:
        """A parent's trial, numbered below zero, at full length."""
        raise NotImplementedError

    def restore(self, number: int, config: Config, ended: TrialResult | None) -> None:
        """A past trial; the tuning loop then replays every stored report (`on_report`)."""
        if number != len(self._params):
            raise ValueError(f"trial {number} restored out of order")
        self._params[number] = to_samples(self._ranges, config)
        if ended is not None:
            self.observe(ended)

    def add_prior(self, config: Config, value: float) -> bool:
        """A parent's finished trial, as a full-length result (numbered below zero)."""
        if self._params:
            raise ValueError("priors go in before this job's own trials")
        params = prior_samples(self._ranges, self._distributions, config, value)
        if params is None:
            return False
        self._priors += 1
        self._prior_params[-self._priors] = dict(params)
        self._learn_prior(-self._priors, value)
        return True
