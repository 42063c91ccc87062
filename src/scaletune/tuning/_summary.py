"""What a tuning job achieved and cost, read from the store: describe() and analytics."""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from scaletune.algorithms import get_algorithm
from scaletune.spec import AlgorithmName
from scaletune.store import JobStatus, MetricPoint, Store, TrainingJobRecord, TuningJobRecord
from scaletune.tuning._tuner import tuned_value


@dataclass(frozen=True)
class TuningSummary:
    record: TuningJobRecord
    trials: list[TrainingJobRecord]
    job_counts: dict[str, int]
    billable_seconds: float
    billable_seconds_without_early_stopping: float
    sequential_wall_seconds: float

    @property
    def waiting_for_room(self) -> list[TrainingJobRecord]:
        """Trials whose workers wait for a busy cluster to make room (Ray)."""
        return [t for t in self.trials if t.waiting_since is not None and not t.status.is_terminal]

    @property
    def best(self) -> TrainingJobRecord | None:
        return next((t for t in self.trials if t.id == self.record.best_training_job), None)

    def to_json_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "id": self.record.id,
            "name": self.record.name,
            "status": self.record.status.value,
            "strategy": self.record.strategy,
            "objective_metric": self.record.spec.get("objective_metric"),
            "objective_type": self.record.spec.get("objective_type"),
            "best_training_job": self.record.best_training_job,
            "best_objective": self.record.best_objective,
            "best_hyperparameters": best.hyperparameters if best else None,
            "job_counts": self.job_counts,
            "waiting_for_room": [t.id for t in self.waiting_for_room],
            "billable_seconds": self.billable_seconds,
            "billable_seconds_without_early_stopping": self.billable_seconds_without_early_stopping,
            "wall_seconds": self.record.wall_seconds,
            "sequential_wall_seconds": self.sequential_wall_seconds,
            "start_time": _iso(self.record.start_time),
            "end_time": _iso(self.record.end_time),
            "failure_reason": self.record.failure_reason,
        }


def summarize(store: Store, tuning_id: str) -> TuningSummary:
    record = store.get_tuning_job(tuning_id)
    trials = store.training_jobs_of(tuning_id)
    counts = Counter(trial.status.value for trial in trials)
    objective = str(record.spec.get("objective_metric"))
    step_seconds = {t.id: _step_seconds(store.metrics(t.id, objective)) for t in trials}
    known = [seconds for seconds in step_seconds.values() if seconds is not None]
    typical = statistics.median(known) if known else None
    max_resource = (record.spec.get("hyperband") or {}).get("max_resource")
    return TuningSummary(
        record=record,
        trials=trials,
        job_counts={status.value: counts.get(status.value, 0) for status in JobStatus},
        billable_seconds=sum(trial.billable_seconds or 0.0 for trial in trials),
        billable_seconds_without_early_stopping=sum(
            _full_cost(trial, step_seconds[trial.id] or typical, max_resource) for trial in trials
        ),
        sequential_wall_seconds=sum(trial.wall_seconds or 0.0 for trial in trials),
    )


def _step_seconds(points: list[MetricPoint]) -> float | None:
    """Median time between successive reports: a trial's wall time per step of resource."""
    if len(points) < 2:
        return None
    return statistics.median(b.time - a.time for a, b in itertools.pairwise(points))


def _full_cost(
    trial: TrainingJobRecord, step_seconds: float | None, max_resource: int | None
) -> float:
    """A stopped trial's cost had it run its full length: what it cost, plus its remaining
    steps at its own time per step, on all its workers."""
    billable = trial.billable_seconds or 0.0
    if trial.status is not JobStatus.STOPPED or not trial.resource or step_seconds is None:
        return billable
    algorithm = get_algorithm(AlgorithmName(trial.algorithm))
    full = algorithm.full_resource(algorithm.parse_hyperparameters(trial.hyperparameters))
    if full is None:
        return billable
    if max_resource is not None:
        full = min(full, max_resource)
    remaining = max(full - trial.resource, 0)
    return billable + remaining * step_seconds * trial.instance_count


def analytics_dataframe(store: Store, tuning_id: str) -> pd.DataFrame:
    """One row per training job: its tuned hyperparameters and the reference's columns."""
    record = store.get_tuning_job(tuning_id)
    tuned = list(record.spec.get("ranges", {}))
    rows = []
    for trial in store.training_jobs_of(tuning_id):
        rows.append(
            {
                **{name: tuned_value(trial, name) for name in tuned},
                "TrainingJobName": trial.id,
                "TrainingJobStatus": trial.status.value,
                "FinalObjectiveValue": trial.objective,
                "TrainingStartTime": _timestamp(trial.start_time),
                "TrainingEndTime": _timestamp(trial.end_time),
                "TrainingElapsedTimeSeconds": trial.wall_seconds,
                "InstanceCount": trial.instance_count,
                "BillableSeconds": trial.billable_seconds,
                "ResourceReached": trial.resource,
                "StopReason": trial.failure_reason,
            }
        )
    columns = [
        *tuned,
        "TrainingJobName",
        "TrainingJobStatus",
        "FinalObjectiveValue",
        "TrainingStartTime",
        "TrainingEndTime",
        "TrainingElapsedTimeSeconds",
        "InstanceCount",
        "BillableSeconds",
        "ResourceReached",
        "StopReason",
    ]
    return pd.DataFrame(rows, columns=columns)


def _timestamp(stamp: float | None) -> pd.Timestamp | None:
    return None if stamp is None else pd.Timestamp(stamp, unit="s", tz="UTC")


def _iso(stamp: float | None) -> str | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat()
