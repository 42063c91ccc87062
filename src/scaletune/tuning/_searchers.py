"""Searchers propose configurations. Random and Bayesian use Optuna's samplers (ask and tell)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from scaletune.errors import InvalidInputError
from scaletune.spec import ContinuousRange, ObjectiveType, Range

if TYPE_CHECKING:  # Optuna is imported when an Optuna searcher is made, not with the package
    import optuna
    from optuna.samplers import BaseSampler

Config = dict[str, object]


@dataclass(frozen=True)
class Suggestion:
    number: int  # 0, 1, 2, ... in the order proposed
    config: Config
    parent: int | None = None  # PBT: the trial whose checkpoint it goes on from


def to_samples(ranges: Mapping[str, Range], config: Mapping[str, object]) -> dict[str, object]:
    """A configuration as the samplers see it (each range's own scale)."""
    return {name: ranges[name].to_sample(config[name]) for name in ranges}  # type: ignore[arg-type]


def from_samples(ranges: Mapping[str, Range], params: Mapping[str, object]) -> Config:
    return {name: ranges[name].from_sample(value) for name, value in params.items()}  # type: ignore[arg-type]


def prior_samples(
    ranges: Mapping[str, Range],
    distributions: Mapping[str, optuna.distributions.BaseDistribution],
    config: Config,
    value: float,
) -> dict[str, object] | None:
    """A parent job's trial as samples, or None when it lacks a range or falls outside one."""
    import optuna

    if any(name not in config for name in ranges):
        return None
    params = to_samples(ranges, config)
    try:  # checks each value against its range
        optuna.trial.create_trial(params=params, distributions=dict(distributions), value=value)
    except ValueError:
        return None
    return params


@dataclass(frozen=True)
class TrialResult:
    """What a searcher learns of a trial that ended, or paused (a paused trial promoted later
    ends with a further result)."""

    number: int  # the suggestion's
    value: float | None  # the objective's last value; None: it failed or never reported
    resource: int | None = None  # the step that value was reported at
    stopped_early: bool = False  # stopped or paused short of its full length
    others: tuple[float, ...] = ()  # the other objectives' values (several); empty: unknown
    violations: tuple[float, ...] = ()  # how far from each constraint (0 where one holds)


class Searcher(Protocol):
    def suggest(self) -> Suggestion | None:
        """The next configuration, or None when the search space is exhausted."""
        ...

    def on_report(self, number: int, step: int, value: float) -> None:
        """A running trial reported `value` of the objective at `step` (model-based
        multi-fidelity searchers learn from the values at each rung)."""
        ...

    def observe(self, result: TrialResult) -> None:
        """The outcome of a suggestion. A trial observed as stopped early may be observed
        again: a paused trial, promoted later, ends with a further result."""
        ...

    def restore(self, number: int, config: Config, ended: TrialResult | None) -> None:
        """A trial proposed before a restart: learn from how it `ended` and never repeat it.
        Called in order of `number`, before any new suggestion. One not ended (None) goes on,
        resumed from its checkpoint: its outcome comes later, through `observe`."""
        ...

    def add_prior(self, config: Config, value: float) -> bool:
        """A result from another tuning job (warm start), before any of this job's trials.
        False where it cannot be used (outside these ranges, or a searcher that does not learn)."""
        ...


class OptunaSearcher:
    """Proposals from an Optuna sampler through ask-and-tell, on an in-memory study; of one
    objective, or of several (`objectives`, the primary first), with constraints told as
    Optuna's constraint values (a sampler that knows them prefers feasible trials)."""

    def __init__(
        self,
        ranges: Mapping[str, Range],
        sampler: BaseSampler,
        objective: ObjectiveType,
        *,
        objectives: Sequence[ObjectiveType] = (),
        first: Sequence[Config] = (),
    ) -> None:
        import optuna
        from optuna.study import StudyDirection

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._ranges = dict(ranges)
        self._distributions = {name: r.distribution() for name, r in self._ranges.items()}
        self._objectives = list(objectives) or [objective]
        directions = [
            StudyDirection.MAXIMIZE if o is ObjectiveType.MAXIMIZE else StudyDirection.MINIMIZE
            for o in self._objectives
        ]
        self._study = optuna.create_study(directions=directions, sampler=sampler)
        self._trials: dict[int, optuna.Trial] = {}  # asked, not yet told
        self._params: dict[int, dict[str, object]] = {}  # each trial's values, as sampled
        self._priors = 0  # warm-start trials: in the study, outside this job's numbering
        self._first = [to_samples(self._ranges, config) for config in first]

    def suggest(self) -> Suggestion:
        number = len(self._params)  # not the study's numbering: a promoted trial is told twice
        if number < len(self._first):  # tried first (after a restart, only those not yet)
            self._study.enqueue_trial(self._first[number], skip_if_exists=False)
        trial = self._study.ask(self._distributions)
        self._trials[number] = trial
        self._params[number] = trial.params
        config = from_samples(self._ranges, trial.params)
        return Suggestion(number, config)

    def on_report(self, number: int, step: int, value: float) -> None:
        pass  # it learns from results, not from the way there

    @property
    def _several(self) -> bool:
        return len(self._objectives) > 1

    def _told(self, result: TrialResult) -> list[float] | None:
        """The values Optuna is told; None where the trial has none to tell (it failed, or
        it never reported one of several objectives)."""
        if result.value is None or len(result.others) != len(self._objectives) - 1:
            return None
        return [result.value, *result.others]

    def observe(self, result: TrialResult) -> None:
        from optuna.trial import TrialState

        trial = self._trials.pop(result.number, None)
        if trial is None:  # told once already (paused): this later result is one more trial
            self._add(self._params[result.number], result)
            return
        value, values = result.value, self._told(result)
        if value is None or (values is None and not result.stopped_early):
            self._study.tell(trial, state=TrialState.FAIL)
        elif result.stopped_early:
            # Samplers weigh a pruned trial by its last intermediate value (Optuna keeps
            # none for several objectives: there it counts as pruned, no more). Its partial
            # costs are not its costs: constraints are left unknown.
            if not self._several:
                trial.report(value, result.resource or 0)
            self._study.tell(trial, state=TrialState.PRUNED)
        else:
            for index, violation in enumerate(result.violations):
                trial.set_constraint(f"c{index}", violation)
            self._study.tell(trial, values)

    def restore(self, number: int, config: Config, ended: TrialResult | None) -> None:
        if number != len(self._params):
            raise ValueError(f"trial {number} restored out of order")
        params = to_samples(self._ranges, config)
        self._params[number] = params
        if ended is None:  # asked again with its own values: a pending trial, as it was
            self._study.enqueue_trial(params, skip_if_exists=False)
            self._trials[number] = self._study.ask(self._distributions)
            return
        self._add(params, ended)

    def _add(self, params: Mapping[str, object], result: TrialResult) -> None:
        """A finished trial, told without being asked."""
        import optuna
        from optuna.trial import TrialState

        value, values = result.value, self._told(result)
        constraints: dict[str, float] | None = None
        if value is None or (values is None and not result.stopped_early):
            state, values, intermediate = TrialState.FAIL, None, {}
        elif result.stopped_early:
            state, values = TrialState.PRUNED, None
            intermediate = {} if self._several else {result.resource or 0: value}
        else:
            state, intermediate = TrialState.COMPLETE, {}
            constraints = {f"c{i}": v for i, v in enumerate(result.violations)} or None
        self._study.add_trial(
            optuna.trial.create_trial(
                params=dict(params),
                distributions=self._distributions,
                values=values,
                state=state,
                intermediate_values=intermediate,
                constraints=constraints,
            )
        )

    def add_prior(self, config: Config, value: float) -> bool:
        import optuna

        if self._several:
            return False  # a parent's one objective is not a point of several
        if self._trials or len(self._study.trials) > self._priors:
            raise ValueError("priors go in before this job's own trials")
        if any(name not in config for name in self._ranges):
            return False
        params = to_samples(self._ranges, config)
        try:
            self._study.add_trial(
                optuna.trial.create_trial(
                    params=params, distributions=self._distributions, value=value
                )
            )
        except ValueError:  # outside this job's ranges
            return False
        self._priors += 1
        return True


def random_searcher(
    ranges: Mapping[str, Range],
    objective: ObjectiveType,
    seed: int,
    *,
    objectives: Sequence[ObjectiveType] = (),
    first: Sequence[Config] = (),
) -> OptunaSearcher:
    from optuna.samplers import RandomSampler

    return OptunaSearcher(
        ranges, RandomSampler(seed=seed), objective, objectives=objectives, first=first
    )


def bayesian_searcher(
    ranges: Mapping[str, Range],
    objective: ObjectiveType,
    seed: int,
    n_startup: int = 10,
    *,
    objectives: Sequence[ObjectiveType] = (),
    first: Sequence[Config] = (),
) -> OptunaSearcher:
    """TPE; the first `n_startup` proposals are random. With one objective, multivariate,
    and `constant_liar` keeps parallel proposals apart while their results are pending. With
    several (MOTPE: its good group is the best non-dominated fronts), Optuna's defaults,
    independent and without the liar: on LCBench with three objectives those find the larger
    front (benchmarks/results/tuning_multi_objective_control.md)."""
    from optuna.samplers import TPESampler

    if len(objectives) > 1:
        sampler = TPESampler(seed=seed, n_startup_trials=n_startup)
    else:
        sampler = TPESampler(
            seed=seed, n_startup_trials=n_startup, multivariate=True, constant_liar=True
        )
    return OptunaSearcher(ranges, sampler, objective, objectives=objectives, first=first)


def nsga2_searcher(
    ranges: Mapping[str, Range],
    objective: ObjectiveType,
    seed: int,
    *,
    objectives: Sequence[ObjectiveType] = (),
    population_size: int = 20,
    first: Sequence[Config] = (),
) -> OptunaSearcher:
    """NSGA-II: generations of `population_size` trials, parents chosen by non-dominated
    rank and crowding (feasible ones first, by Optuna's constrained domination)."""
    from optuna.samplers import NSGAIISampler

    sampler = NSGAIISampler(seed=seed, population_size=population_size)
    return OptunaSearcher(ranges, sampler, objective, objectives=objectives, first=first)


class GridSearcher:
    """Every combination of categorical and integer ranges, in a fixed order."""

    def __init__(self, ranges: Mapping[str, Range]) -> None:
        axes = {}
        for name, parameter in ranges.items():
            if isinstance(parameter, ContinuousRange):
                raise InvalidInputError(
                    f"ranges.{name}: Grid search needs Categorical or Integer ranges "
                    "(a continuous range has no grid); use Random or Bayesian"
                )
            axes[name] = parameter.grid()
        self._names = list(axes)
        self._points = itertools.product(*axes.values())
        self._count = 0

    def suggest(self) -> Suggestion | None:
        point = next(self._points, None)
        if point is None:
            return None
        suggestion = Suggestion(self._count, dict(zip(self._names, point, strict=True)))
        self._count += 1
        return suggestion

    def on_report(self, number: int, step: int, value: float) -> None:
        pass  # the grid does not learn

    def observe(self, result: TrialResult) -> None:
        pass  # the grid does not learn

    def restore(self, number: int, config: Config, ended: TrialResult | None) -> None:
        if number != self._count or next(self._points, None) is None:
            raise ValueError(f"grid point {number} restored out of order")
        self._count += 1

    def add_prior(self, config: Config, value: float) -> bool:
        return False  # the grid is walked in full whatever came before
