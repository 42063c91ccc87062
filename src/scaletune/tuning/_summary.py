"""What a tuning job achieved and cost, read from the store: describe() and analytics.

Both are SQL aggregates and one indexed scan of the trials: a summary of 10,000 trials reads
a handful of rows, never every trial's record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scaletune.store import JobStatus, Store, TrainingJobRecord, TrialRow, TuningJobRecord
from scaletune.tuning._values import tuned_value

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class TuningSummary:
    record: TuningJobRecord
    best: TrainingJobRecord | None
    trial_count: int
    job_counts: dict[str, int]
    billable_seconds: float
    billable_seconds_without_early_stopping: float
    sequential_wall_seconds: float
    waiting_for_room: list[str]  # trials whose workers wait for a busy cluster (Ray)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "id": self.record.id,
            "name": self.record.name,
            "status": self.record.status.value,
            "strategy": self.record.strategy,
            "objective_metric": self.record.spec.get("objective_metric"),
            "objective_type": self.record.spec.get("objective_type"),
            "best_training_job": self.record.best_training_job,
            "best_objective": self.record.best_objective,
            "best_hyperparameters": self.best.hyperparameters if self.best else None,
            "trials": self.trial_count,
            "job_counts": self.job_counts,
            "waiting_for_room": self.waiting_for_room,
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
    max_resource = (record.spec.get("hyperband") or {}).get("max_resource")
    totals = store.trials.totals(tuning_id, max_resource)
    best = store.get_training_job(record.best_training_job) if record.best_training_job else None
    return TuningSummary(
        record=record,
        best=best,
        trial_count=totals.trials,
        job_counts={status.value: totals.job_counts[status] for status in JobStatus},
        billable_seconds=totals.billable_seconds,
        # A stopped trial's cost had it run its full length: what it cost, plus its
        # remaining steps at its own time per step, on all its workers.
        billable_seconds_without_early_stopping=totals.billable_seconds + totals.unspent_seconds,
        sequential_wall_seconds=totals.sequential_wall_seconds,
        waiting_for_room=totals.waiting_for_room,
    )


ANALYTICS_COLUMNS = (
    "TrainingJobName",
    "TrainingJobStatus",
    "FinalObjectiveValue",
    "TrainingStartTime",
    "TrainingEndTime",
    "TrainingElapsedTimeSeconds",
    "InstanceCount",
    "BillableSeconds",
    "ResourceReached",
    "HyperbandBracket",
    "RungsReached",
    "StopReason",
)


def analytics_rows(record: TuningJobRecord, trials: list[TrialRow]) -> list[dict[str, Any]]:
    """One row per training job: its tuned hyperparameters and the reference's columns
    (times as POSIX seconds)."""
    tuned = list(record.spec.get("ranges", {}))
    rungs_of = _rungs_of(record)
    return [
        {
            **{name: tuned_value(trial, name) for name in tuned},
            "TrainingJobName": trial.id,
            "TrainingJobStatus": trial.status.value,
            "FinalObjectiveValue": trial.objective,
            "TrainingStartTime": trial.start_time,
            "TrainingEndTime": trial.end_time,
            "TrainingElapsedTimeSeconds": trial.wall_seconds,
            "InstanceCount": trial.instance_count,
            "BillableSeconds": trial.billable_seconds,
            "ResourceReached": trial.resource,
            **rungs_of(trial),
            "StopReason": trial.failure_reason,
        }
        for trial in trials
    ]


def _rungs_of(record: TuningJobRecord) -> Callable[[TrialRow], dict[str, Any]]:
    """Each trial's Hyperband bracket and the rungs it reached (space-separated steps). The
    tuner records the bracket; a store from before it did draws it again from the seed and the
    trial's number (as Hyperband's fixed weights drew it)."""
    settings = record.spec.get("hyperband")
    if not settings:
        return lambda trial: {"HyperbandBracket": None, "RungsReached": None}
    from scaletune.tuning._hyperband import draw_bracket, hyperband_brackets

    brackets, weights = hyperband_brackets(
        settings["min_resource"],
        settings["max_resource"],
        settings["eta"],
        settings.get("brackets"),
    )
    seed = int(record.spec.get("seed", 0))

    def rungs(trial: TrialRow) -> dict[str, Any]:
        if trial.trial_number is None:
            return {"HyperbandBracket": None, "RungsReached": None}
        bracket = trial.hyperband_bracket
        if bracket is None and trial.resource is None:  # never reported: never drawn
            return {"HyperbandBracket": None, "RungsReached": ""}
        if bracket is None:
            bracket = draw_bracket(seed, trial.trial_number, weights)
        reached = [rung for rung in brackets[bracket] if (trial.resource or 0) >= rung]
        return {"HyperbandBracket": bracket, "RungsReached": " ".join(map(str, reached))}

    return rungs


def analytics_dataframe(store: Store, tuning_id: str) -> pd.DataFrame:
    """The analytics rows as a DataFrame, times as UTC timestamps."""
    import pandas as pd  # heavy; only analytics needs it

    record = store.get_tuning_job(tuning_id)
    columns = [*record.spec.get("ranges", {}), *ANALYTICS_COLUMNS]
    frame = pd.DataFrame(analytics_rows(record, store.trials.rows(tuning_id)), columns=columns)
    for column in ("TrainingStartTime", "TrainingEndTime"):
        frame[column] = pd.to_datetime(frame[column], unit="s", utc=True)
    return frame


def _iso(stamp: float | None) -> str | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat()
