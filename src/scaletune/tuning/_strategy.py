"""From a tuning spec to the searcher that proposes and the scheduler that stops."""

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


def make_search(
    spec: TuningJobSpec, *, has_checkpoint: Callable[[int], bool] | None = None
) -> tuple[Searcher, Scheduler, PopulationBasedTraining | None]:
    """The searcher and the scheduler of a tuning job; for PBT, both faces of one population
    (returned too: the tuning loop tells it when a restore ends), which copies checkpoints
    only from trials that `has_checkpoint`."""
    if spec.strategy is Strategy.PBT:
        assert spec.pbt is not None  # the spec refuses PBT without [pbt]
        population = PopulationBasedTraining(
            spec.ranges,
            spec.objective_type,
            spec.seed,
            spec.pbt,
            population=spec.population_size,
            max_jobs=spec.max_jobs,
            first=spec.first_points,
            has_checkpoint=has_checkpoint,
        )
        return population.searcher, population.scheduler, population
    return make_searcher(spec), make_scheduler(spec), None


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
    if searcher == "LastValueTPE":  # Hyperband's default with one objective
        return LastValueSearcher(ranges, objective, seed, first=first)
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
