"""What the model-based searchers of Hyperband share (`_lastvalue`, `_multifidelity`): each
trial's values as sampled, the first configurations and random draws before a model, a parent
job's trials as priors numbered below zero, and a restore that replays past trials."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scaletune.spec import Range
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
