"""A tuning job's goals, applied to one trial: its value of each objective (a reported
metric's final value, or the trial's own billable seconds or wall time) and whether it meets
the constraints. The tuner, the summaries, the report and the console share this one rule."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from scaletune.analysis._pareto import Direction
from scaletune.spec._names import BILLABLE_SECONDS, WALL_SECONDS, ObjectiveType

if TYPE_CHECKING:
    from scaletune.spec import ConstraintSpec, ObjectiveSpec
    from scaletune.store import StoredTuningSpec

# What a constrained sampler is told for a constraint a trial never reported (it must rank
# below every measured violation, and Optuna refuses NaN).
_UNKNOWN_VIOLATION = 1e12


class _Recorded(Protocol):
    """What a trial's record and its row in a listing both have of its costs."""

    @property
    def final_metrics(self) -> Mapping[str, float] | None: ...

    @property
    def billable_seconds(self) -> float | None: ...

    @property
    def wall_seconds(self) -> float | None: ...


@dataclass(frozen=True)
class Objective:
    metric: str
    type: ObjectiveType

    @property
    def maximize(self) -> bool:
        return self.type is ObjectiveType.MAXIMIZE

    def as_dict(self) -> dict[str, str]:
        return {"metric": self.metric, "type": self.type.value}


@dataclass(frozen=True)
class Constraint:
    """A trial is feasible when its final value of `metric` is within [min, max]."""

    metric: str
    min: float | None = None
    max: float | None = None

    def holds(self, value: float | None) -> bool:
        """A trial that never reached the metric does not meet the constraint."""
        if value is None:
            return False
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def violation(self, value: float | None) -> float:
        """How far outside its bounds (0 when it holds): what constrained samplers minimise."""
        if value is None:
            return float("inf")
        below = 0.0 if self.min is None else max(0.0, self.min - value)
        above = 0.0 if self.max is None else max(0.0, value - self.max)
        return below + above

    def describe(self) -> str:
        parts = []
        if self.min is not None:
            parts.append(f"{self.metric} >= {self.min:g}")
        if self.max is not None:
            parts.append(f"{self.metric} <= {self.max:g}")
        return " and ".join(parts)


@dataclass(frozen=True)
class TrialCosts:
    """What a trial recorded: its final metrics and its costs."""

    final_metrics: Mapping[str, float]
    billable_seconds: float | None
    wall_seconds: float | None

    @classmethod
    def of(cls, trial: _Recorded) -> TrialCosts:
        """A trial's, from its record or its row in a listing."""
        return cls(trial.final_metrics or {}, trial.billable_seconds, trial.wall_seconds)

    def value(self, metric: str) -> float | None:
        if metric == BILLABLE_SECONDS:
            return self.billable_seconds
        if metric == WALL_SECONDS:
            return self.wall_seconds
        value = self.final_metrics.get(metric)
        return None if value is None or not math.isfinite(value) else float(value)


@dataclass(frozen=True)
class Goals:
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...] = ()

    @classmethod
    def of_spec(
        cls,
        objectives: Sequence[ObjectiveSpec],
        constraints: Sequence[ConstraintSpec] = (),
    ) -> Goals:
        return cls(
            tuple(Objective(o.metric, o.type) for o in objectives),
            tuple(Constraint(c.metric, c.min, c.max) for c in constraints),
        )

    @classmethod
    def of_stored(cls, spec: StoredTuningSpec) -> Goals:
        """A stored tuning job's, from its spec's typed view (reading a job stays light)."""
        return cls(
            tuple(Objective(o.metric, o.type) for o in spec.objectives),
            tuple(Constraint(c.metric, c.min, c.max) for c in spec.constraints),
        )

    @property
    def is_multi_objective(self) -> bool:
        return len(self.objectives) > 1

    @property
    def directions(self) -> list[Direction]:
        return [Direction(o.metric, o.maximize) for o in self.objectives]

    def values(self, trial: TrialCosts) -> tuple[float, ...] | None:
        """Every objective's value, the primary first; None if one is missing."""
        values = [trial.value(o.metric) for o in self.objectives]
        if any(v is None for v in values):
            return None
        return tuple(v for v in values if v is not None)

    def violations(self, trial: TrialCosts) -> tuple[float, ...]:
        """Each constraint's violation (0 where it holds)."""
        return tuple(
            min(c.violation(trial.value(c.metric)), _UNKNOWN_VIOLATION) for c in self.constraints
        )

    def feasible(self, trial: TrialCosts) -> bool:
        return all(c.holds(trial.value(c.metric)) for c in self.constraints)

    def outcome(self, trial: TrialCosts) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """What a searcher learns of an ended trial beside its objective: the other
        objectives' values (empty with one objective, or when one is missing) and its
        distance from each constraint."""
        values = self.values(trial) if self.is_multi_objective else None
        return (values[1:] if values else ()), self.violations(trial)

    @property
    def reported_others(self) -> list[str]:
        """The objectives after the first that are metrics a job reports (not its costs)."""
        return [
            o.metric
            for o in self.objectives[1:]
            if o.metric not in (BILLABLE_SECONDS, WALL_SECONDS)
        ]

    def standing(
        self, latest: Mapping[str, float], elapsed_seconds: float, billable_seconds: float
    ) -> tuple[float, ...]:
        """The objectives after the first as they stand while a trial runs: a reported
        metric's latest value (NaN before its first report), the seconds it has run, and
        its billable seconds so far."""
        values = []
        for objective in self.objectives[1:]:
            if objective.metric == WALL_SECONDS:
                values.append(elapsed_seconds)
            elif objective.metric == BILLABLE_SECONDS:
                values.append(billable_seconds)
            else:
                values.append(latest.get(objective.metric, math.nan))
        return tuple(values)
