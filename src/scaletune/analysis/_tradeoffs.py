"""What a tuning job offers to choose from, read from the store: with several objectives, the
trials on the Pareto front; with a target, the cheapest and the fastest trial that reached it.

Only trials that meet the constraints count. The front holds Completed trials alone: a trial
stopped early has its quality at a lower fidelity and its cost cut short, so it would sit on
the front as a cheap point that no finished run reaches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scaletune.analysis._objectives import Goals, TrialCosts
from scaletune.analysis._pareto import pareto_front
from scaletune.analysis._values import tuned_value
from scaletune.spec._names import BILLABLE_SECONDS, WALL_SECONDS
from scaletune.store import JobStatus, Store, TrialRow, TuningJobRecord


@dataclass(frozen=True)
class TradeOff:
    """One trial as a choice: its settings, its cluster size and what it achieved and cost."""

    job_id: str
    trial_number: int | None
    instance_count: int
    hyperparameters: dict[str, Any]  # the tuned ones
    values: dict[str, float]  # each objective's value, billable and wall seconds too

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "training_job": self.job_id,
            "trial_number": self.trial_number,
            "instance_count": self.instance_count,
            "hyperparameters": self.hyperparameters,
            "objectives": self.values,
        }


@dataclass(frozen=True)
class TargetView:
    """Who reached `target_objective`, and which of them cost least and ended soonest."""

    metric: str
    target: float
    reached: int
    cheapest: TradeOff | None
    fastest: TradeOff | None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "objective_metric": self.metric,
            "target_objective": self.target,
            "trials_reaching_it": self.reached,
            "cheapest": None if self.cheapest is None else self.cheapest.to_json_dict(),
            "fastest": None if self.fastest is None else self.fastest.to_json_dict(),
        }


def _trade_off(record: TuningJobRecord, goals: Goals, row: TrialRow) -> TradeOff:
    costs = TrialCosts.of(row)
    names = [o.metric for o in goals.objectives] + [BILLABLE_SECONDS, WALL_SECONDS]
    values = {name: value for name in names if (value := costs.value(name)) is not None}
    return TradeOff(
        job_id=row.id,
        trial_number=row.trial_number,
        instance_count=row.instance_count,
        hyperparameters={name: tuned_value(row, name) for name in record.spec_view.tuned},
        values=values,
    )


def front_of(store: Store, record: TuningJobRecord) -> list[TradeOff] | None:
    """The Completed, feasible trials no other such trial beats on every objective, best
    first by the first objective; None for a job of one objective."""
    goals = Goals.of_stored(record.spec_view)
    if not goals.is_multi_objective:
        return None
    rows = {
        row.id: row
        for row in store.trials.results(record.id, [JobStatus.COMPLETED])
        if goals.feasible(TrialCosts.of(row))
    }
    points = {
        key: values for key, row in rows.items() if (values := goals.values(TrialCosts.of(row)))
    }
    return [_trade_off(record, goals, rows[key]) for key in pareto_front(points, goals.directions)]


def target_view(store: Store, record: TuningJobRecord) -> TargetView | None:
    """The trials whose objective reached `target_objective` (and that meet the
    constraints): how many, the one with the least billable seconds, the one with the least
    wall time. None without a target."""
    target = record.spec_view.target_objective
    if target is None:
        return None
    goals = Goals.of_stored(record.spec_view)
    maximize = record.spec_view.objective.maximize
    rows = [
        row
        for row in store.trials.results(
            record.id,
            [JobStatus.COMPLETED, JobStatus.STOPPED, JobStatus.PAUSED],
            objective_at_least=target if maximize else None,
            objective_at_most=None if maximize else target,
        )
        if goals.feasible(TrialCosts.of(row))
    ]

    def least(key: str) -> TradeOff | None:
        known = [row for row in rows if getattr(row, key) is not None]
        if not known:
            return None
        return _trade_off(record, goals, min(known, key=lambda row: getattr(row, key)))

    return TargetView(
        metric=record.spec_view.objective.metric,
        target=float(target),
        reached=len(rows),
        cheapest=least("billable_seconds"),
        fastest=least("wall_seconds"),
    )
