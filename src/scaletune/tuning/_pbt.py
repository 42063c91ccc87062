"""Population-based training (Jaderberg et al. 2017), asynchronous as Ray Tune runs it.

A population of trials trains side by side. Each time a member has gone `perturbation_interval`
more steps, it is ranked among the members running: one in the bottom `quantile_fraction` is
stopped (exploited), and a new trial takes its place, going on from the newest checkpoint of a
member in the top fraction (its model, optimiser and reports up to there) with that member's
settings perturbed (explore). Each exploit is a trial of its own: its job starts from the
donor's checkpoint (`checkpoint.start_from`), so every trial's record stays the truth about
one configuration, and the lineage is the chain of those starts.

`PopulationBasedTraining` holds the population; its `searcher` and `scheduler` are the two
faces the tuning loop asks (what to start next; whether a report stops a trial)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scaletune.spec import (
    CategoricalRange,
    ContinuousRange,
    IntegerRange,
    ObjectiveType,
    PBTSpec,
    Range,
    Scaling,
)
from scaletune.spec._names import CLUSTER_SIZE
from scaletune.tuning._schedulers import CONTINUE, Decided, Decision, Verdict
from scaletune.tuning._searchers import (
    Config,
    OptunaSearcher,
    Suggestion,
    TrialResult,
    random_searcher,
)


@dataclass(frozen=True)
class Exploit:
    """A member stopped for a copy of a better one: `donor`'s checkpoint, perturbed (no
    member was stopped for one that refills the population after a restart)."""

    exploited: int | None
    donor: int
    donor_step: int  # the donor's newest report then: its new trial goes on from about there


class PopulationBasedTraining:
    def __init__(
        self,
        ranges: Mapping[str, Range],
        objective: ObjectiveType,
        seed: int,
        settings: PBTSpec,
        *,
        population: int,
        max_jobs: int,
        first: Sequence[Config] = (),
        has_checkpoint: Callable[[int], bool] | None = None,
    ) -> None:
        """`has_checkpoint`: whether a trial has a complete checkpoint to copy (the tuning
        loop knows where trials keep them); a member without one is no donor yet."""
        self._ranges = dict(ranges)
        self._maximize = objective is ObjectiveType.MAXIMIZE
        self._settings = settings
        self._population = population
        self._max_jobs = max_jobs
        self._rng = random.Random(seed)
        # The first members are drawn as strategy Random draws them (the same seed, the same
        # configurations), so a PBT job and a random search start from the same population.
        self._initial: OptunaSearcher = random_searcher(ranges, objective, seed, first=first)
        self._configs: dict[int, Config] = {}
        self._latest: dict[int, float] = {}  # running members: their newest value
        self._step: dict[int, int] = {}  # ... and the step it came at
        self._ready_at: dict[int, int] = {}  # the step each member was last ranked at
        self._running: set[int] = set()  # members started and neither ended nor exploited
        self._pending: list[Exploit] = []  # exploits whose new trial has not started
        self._count = 0  # trials proposed
        # From the first trial restored until `restored`: replayed reports rebuild the state
        # and decide nothing.
        self._restoring = False
        self._has_checkpoint = has_checkpoint or (lambda number: True)
        self.searcher = _Searcher(self)
        self.scheduler = _Scheduler(self)

    # -- what to start -----------------------------------------------------------------------

    def suggest(self) -> Suggestion | None:
        """An exploit's new trial first, else a first member; None while neither is due."""
        if self._pending:
            exploit = self._pending.pop(0)
            config = self.explore(self._configs[exploit.donor])
            number = self._propose(config)
            # Ranked again once it has trained an interval of its own.
            self._ready_at[number] = exploit.donor_step
            return Suggestion(number, config, parent=exploit.donor)
        if self._count < self._population:
            drawn = self._initial.suggest()
            number = self._propose(drawn.config)
            return Suggestion(number, drawn.config)
        return None

    def may_propose(self) -> bool:
        """Whether `suggest` has something now (more may come as members report)."""
        return bool(self._pending) or self._count < self._population

    def _propose(self, config: Config) -> int:
        number = self._count
        self._count += 1
        self._configs[number] = config
        self._running.add(number)
        return number

    def explore(self, config: Mapping[str, object]) -> Config:
        """The donor's settings perturbed: each drawn afresh with `resample_probability`,
        else multiplied by one of `perturbation_factors` (for a range dense near 1, its
        distance to 1) and kept within its range; a category moves to a neighbour. A tuned
        cluster size is the donor's: the copy goes on from its workers' checkpoint."""
        perturbed: Config = {}
        for name, parameter in self._ranges.items():
            value = config[name]
            if name == CLUSTER_SIZE:  # a checkpoint may hold each worker's state: kept
                perturbed[name] = value
            elif self._rng.random() < self._settings.resample_probability:
                perturbed[name] = self._draw(parameter)
            elif isinstance(parameter, CategoricalRange):
                values = parameter.values
                index = values.index(value) + self._rng.choice((-1, 1))  # type: ignore[arg-type]
                perturbed[name] = values[min(max(index, 0), len(values) - 1)]
            else:
                factor = self._rng.choice(self._settings.perturbation_factors)
                perturbed[name] = _scaled(parameter, float(value), factor)  # type: ignore[arg-type]
        return perturbed

    def _draw(self, parameter: Range) -> object:
        if isinstance(parameter, CategoricalRange):
            return self._rng.choice(parameter.values)
        low, high = float(parameter.min_value), float(parameter.max_value)
        scaling = parameter.distribution()
        if isinstance(parameter, ContinuousRange) and (
            parameter.effective_scaling is Scaling.REVERSE_LOGARITHMIC
        ):
            return 1 - math.exp(self._rng.uniform(math.log(1 - high), math.log(1 - low)))
        if getattr(scaling, "log", False):
            value = math.exp(self._rng.uniform(math.log(low), math.log(high)))
        else:
            value = self._rng.uniform(low, high)
        return min(max(round(value), int(low)), int(high)) if _integer(parameter) else value

    # -- what a report decides -----------------------------------------------------------------

    def on_report(self, trial: int, step: int, value: float) -> Verdict:
        if trial not in self._running:
            return CONTINUE  # exploited already: it is stopping
        self._latest[trial], self._step[trial] = value, step
        if step - self._ready_at.get(trial, 0) < self._settings.perturbation_interval:
            return CONTINUE
        self._ready_at[trial] = step
        if self._restoring or not self._may_exploit():
            return CONTINUE
        bottom, top = self._quantiles(self._latest)
        if trial not in bottom:
            return CONTINUE
        return self._exploit(trial, step, value, top)

    def _may_exploit(self) -> bool:
        return self._count + len(self._pending) < self._max_jobs

    def _exploit(self, trial: int, step: int, value: float, top: Sequence[int]) -> Verdict:
        """Stop `trial` for a copy of one of the `top` members that has a checkpoint."""
        donors = sorted(member for member in top if self._has_checkpoint(member))
        if not donors:
            return CONTINUE
        donor = self._rng.choice(donors)
        self._pending.append(Exploit(trial, donor, self._step[donor]))
        self._forget(trial)
        return Verdict(
            Decision.STOP,
            f"exploited at step {step}: {value:.6g} is in the bottom "
            f"{self._settings.quantile_fraction:.0%} of the population; a new trial goes on "
            f"from trial {donor}'s checkpoint with its settings perturbed",
        )

    def _quantiles(self, values: Mapping[int, float]) -> tuple[list[int], list[int]]:
        """The bottom and the top members by `values` (Ray Tune's sizes: the fraction of the
        ranked members, rounded up, at most half of them)."""
        ranked = sorted(values, key=values.__getitem__, reverse=not self._maximize)  # worst first
        if len(ranked) < 2:
            return [], []
        size = min(math.ceil(len(ranked) * self._settings.quantile_fraction), len(ranked) // 2)
        return ranked[:size], ranked[-size:]

    def on_end(self, trial: int) -> None:
        self._forget(trial)

    def _forget(self, trial: int) -> None:
        self._running.discard(trial)
        self._latest.pop(trial, None)
        self._step.pop(trial, None)

    # -- after a restart -----------------------------------------------------------------------

    def restore(self, number: int, config: Config, *, running: bool) -> None:
        """A trial proposed before a restart, in order of number."""
        self._restoring = True
        if number < self._population:  # a first member: the random draws go on after it
            self._initial.restore(number, config, None if running else TrialResult(number, None))
        self._count = max(self._count, number + 1)
        self._configs[number] = config
        self._running.add(number)  # until its end is replayed

    def restored(self) -> None:
        """Replayed reports rebuilt the ranking. An exploit whose new trial had not started
        when the controller died is lost with it: the population is filled up again with
        copies of its best members that have a checkpoint."""
        self._restoring = False
        missing = self._population - len(self._running)
        ranked = sorted(self._latest, key=lambda m: self._latest[m], reverse=self._maximize)
        donors = [member for member in ranked if self._has_checkpoint(member)]
        while missing > 0 and donors and self._count + len(self._pending) < self._max_jobs:
            donor = donors[len(self._pending) % len(donors)]
            self._pending.append(Exploit(None, donor, self._step[donor]))
            missing -= 1

    @property
    def pending(self) -> Sequence[Exploit]:
        return tuple(self._pending)

    def judged_steps(self, full_resource: int | None) -> frozenset[int]:
        # A member is ranked perturbation_interval steps after its last ranking, wherever
        # it started (an exploit's copy starts at its donor's step): no fixed steps.
        return frozenset()

    def take_decided(self) -> list[Decided]:
        return []  # each report is decided on its own


class _Searcher:
    """The tuning loop's searcher: what to start."""

    def __init__(self, population: PopulationBasedTraining) -> None:
        self._population = population

    def suggest(self) -> Suggestion | None:
        return self._population.suggest()

    def on_report(self, number: int, step: int, value: float) -> None:
        pass  # the scheduler face ranks the reports

    def observe(self, result: TrialResult) -> None:
        pass  # a member's end reaches the scheduler face (on_end)

    def restore(self, number: int, config: Config, ended: TrialResult | None) -> None:
        self._population.restore(number, config, running=ended is None)

    def add_prior(self, config: Config, value: float) -> bool:
        return False  # a population starts from its own members


class _Scheduler:
    """The tuning loop's scheduler: whether a report stops its trial."""

    def __init__(self, population: PopulationBasedTraining) -> None:
        self._population = population

    def on_report(
        self, trial: int, resource: int, value: float, others: Sequence[float] = ()
    ) -> Verdict:
        return self._population.on_report(trial, resource, value)

    def on_end(self, trial: int) -> None:
        self._population.on_end(trial)

    def promote(self) -> int | None:
        return None  # nothing pauses

    def on_resumed(self, trial: int) -> None:
        pass

    def bracket(self, trial: int) -> int | None:
        return None

    def judged_steps(self, full_resource: int | None) -> frozenset[int]:
        return self._population.judged_steps(full_resource)

    def take_decided(self) -> list[Decided]:
        return self._population.take_decided()


def _integer(parameter: Range) -> bool:
    return isinstance(parameter, IntegerRange)


def _scaled(parameter: ContinuousRange | IntegerRange, value: float, factor: float) -> object:
    low, high = parameter.min_value, parameter.max_value
    if isinstance(parameter, ContinuousRange) and (
        parameter.effective_scaling is Scaling.REVERSE_LOGARITHMIC
    ):
        scaled = 1 - (1 - value) * factor  # its distance to 1 grows or shrinks
    else:
        scaled = value * factor
    if isinstance(parameter, IntegerRange):
        return int(min(max(round(scaled), low), high))
    return min(max(scaled, low), high)
