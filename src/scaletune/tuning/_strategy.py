"""From a tuning spec to its search: the searcher that proposes and the scheduler that stops
(for PBT, one population that does both)."""

from __future__ import annotations

from collections.abc import Callable

from scaletune.analysis._layout import hyperband_brackets
from scaletune.analysis._objectives import Goals
from scaletune.analysis._pareto import Direction
from scaletune.spec import EarlyStopping, Strategy, TuningJobSpec
from scaletune.tuning._bayesian import ParzenSearcher
from scaletune.tuning._hyperband import hyperband_scheduler
from scaletune.tuning._lastvalue import LastValueSearcher
from scaletune.tuning._multifidelity import RungModelSearcher
from scaletune.tuning._pbt import PopulationBasedTraining
from scaletune.tuning._pbt_synchronous import SynchronousPopulationBasedTraining
from scaletune.tuning._quantile import QuantileSearcher, TPEThenQuantileSearcher
from scaletune.tuning._schedulers import FIFOScheduler, MedianStoppingScheduler, Scheduler
from scaletune.tuning._searchers import (
    GridSearcher,
    Searcher,
    bayesian_searcher,
    nsga2_searcher,
    random_searcher,
)


def goals_of(spec: TuningJobSpec) -> Goals:
    return Goals.of_spec(spec.all_objectives, spec.constraints)


class Search:
    """A tuning job's strategy as its loop sees it: a searcher that proposes trials and a
    scheduler that judges their reports."""

    def __init__(self, searcher: Searcher, scheduler: Scheduler) -> None:
        self.searcher, self.scheduler = searcher, scheduler

    def exhausted(self) -> bool:
        """Asked when the searcher proposed nothing: whether it never will again (a grid
        tried whole), which ends the search."""
        return True

    def may_propose(self, proposed: int, max_jobs: int) -> bool:
        """Whether a new trial may still start, `proposed` of `max_jobs` so far (promotions
        may come besides while trials run)."""
        return proposed < max_jobs

    def restored(self) -> None:
        """The trials in the store were replayed into both faces (a resumed tuning job)."""


class PopulationSearch(Search):
    """PBT: one population is both faces. It proposes a new member when a running one is
    exploited, and a copy starts from its donor's checkpoint."""

    def __init__(self, population: PopulationBasedTraining) -> None:
        super().__init__(population.searcher, population.scheduler)
        self._population = population

    def exhausted(self) -> bool:
        return False  # a new member comes when a running one is exploited

    def may_propose(self, proposed: int, max_jobs: int) -> bool:
        return self._population.may_propose()

    def restored(self) -> None:
        self._population.restored()


def make_search(
    spec: TuningJobSpec, *, has_checkpoint: Callable[[int], bool] | None = None
) -> Search:
    """The searcher and the scheduler of a tuning job; for PBT, both faces of one population,
    which copies checkpoints only from trials that `has_checkpoint`."""
    if spec.strategy is Strategy.PBT:
        assert spec.pbt is not None  # the spec refuses PBT without [pbt]
        kind = (
            SynchronousPopulationBasedTraining if spec.pbt.synchronous else PopulationBasedTraining
        )
        return PopulationSearch(
            kind(
                spec.ranges,
                spec.objective_type,
                spec.seed,
                spec.pbt,
                population=spec.population_size,
                max_jobs=spec.max_jobs,
                first=spec.first_points,
                has_checkpoint=has_checkpoint,
            )
        )
    return Search(make_searcher(spec), make_scheduler(spec))


def make_searcher(spec: TuningJobSpec) -> Searcher:
    ranges, objective, seed, first = spec.ranges, spec.objective_type, spec.seed, spec.first_points
    objectives = [o.type for o in spec.all_objectives] if spec.is_multi_objective else []
    if spec.strategy is Strategy.GRID:
        return GridSearcher(ranges)
    if spec.strategy is Strategy.NSGA_II:
        return nsga2_searcher(ranges, objective, seed, objectives=objectives, first=first)
    hyperband, searcher = spec.hyperband, spec.hyperband_searcher
    if hyperband is not None and searcher == "BOHB":
        brackets, _ = hyperband_brackets(
            hyperband.min_resource, hyperband.max_resource, hyperband.eta, hyperband.brackets
        )
        levels = [rung for rungs in brackets for rung in rungs] + [hyperband.max_resource]
        return RungModelSearcher(ranges, objective, seed, levels, first=first)
    if searcher == "LastValueTPE":
        return LastValueSearcher(ranges, objective, seed, first=first)
    if searcher == "LastValueCQR":
        return QuantileSearcher(ranges, objective, seed, first=first)
    if searcher == "LastValueTPEThenCQR":  # Hyperband's default with one objective
        return TPEThenQuantileSearcher(ranges, objective, seed, first=first)
    if spec.strategy is Strategy.BAYESIAN or searcher == "Bayesian":
        if objectives:  # MOTPE: Optuna's, its good group the best non-dominated fronts
            return bayesian_searcher(ranges, objective, seed, objectives=objectives, first=first)
        return ParzenSearcher(ranges, objective, seed, first=first)
    # Random, and Hyperband's default with several objectives
    return random_searcher(ranges, objective, seed, objectives=objectives, first=first)


def make_scheduler(spec: TuningJobSpec) -> Scheduler:
    if spec.hyperband is not None:
        return hyperband_scheduler(
            spec.objective_type,
            min_resource=spec.hyperband.min_resource,
            max_resource=spec.hyperband.max_resource,
            eta=spec.hyperband.eta,
            seed=spec.seed,
            brackets=spec.hyperband.brackets,
            kind=spec.hyperband.type,
            bracket_weights=spec.hyperband.bracket_weights,
            rank_by=spec.hyperband_rank_by or "value",
            objectives=(
                [Direction(o.metric, o.maximize) for o in spec.all_objectives]
                if spec.is_multi_objective
                else None
            ),
        )
    if spec.early_stopping is EarlyStopping.AUTO:
        return MedianStoppingScheduler(spec.objective_type)
    return FIFOScheduler()
