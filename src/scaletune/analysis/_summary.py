"""What a tuning job achieved and cost, read from the store: describe() and analytics.

Both are SQL aggregates and one indexed scan of the trials: a summary of 10,000 trials reads
a handful of rows, never every trial's record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scaletune.analysis._layout import draw_bracket, hyperband_brackets
from scaletune.analysis._objectives import Goals, TrialCosts
from scaletune.analysis._tradeoffs import TargetView, TradeOff, front_of, target_view
from scaletune.analysis._values import tuned_value
from scaletune.store import JobStatus, Store, TrainingJobRecord, TrialRow, TuningJobRecord

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
    pareto_front: list[TradeOff] | None = None  # with several objectives
    target: TargetView | None = None  # with a target_objective

    def to_json_dict(self) -> dict[str, Any]:
        goals = Goals.of_stored(self.record.spec_view)
        return {
            "id": self.record.id,
            "name": self.record.name,
            "status": self.record.status.value,
            "strategy": self.record.strategy,
            "objective_metric": self.record.spec_view.objective.metric,
            "objective_type": self.record.spec_view.objective.type.value,
            "objectives": [o.as_dict() for o in goals.objectives],
            "constraints": [c.describe() for c in goals.constraints],
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
            "completion_reason": self.record.completion_reason,
            "pareto_front": None
            if self.pareto_front is None
            else [point.to_json_dict() for point in self.pareto_front],
            "target": None if self.target is None else self.target.to_json_dict(),
        }


def summarize(store: Store, tuning_id: str, *, trade_offs: bool = True) -> TuningSummary:
    """What the tuning job achieved and cost; with `trade_offs`, its Pareto front (several
    objectives) and its target view too (a list of jobs leaves those out)."""
    record = store.get_tuning_job(tuning_id)
    hyperband = record.spec_view.hyperband
    max_resource = None if hyperband is None else hyperband.max_resource
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
        pareto_front=front_of(store, record) if trade_offs else None,
        target=target_view(store, record) if trade_offs else None,
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
    "Feasible",
    "ParetoFront",
    "ParentTrial",  # PBT: the trial whose checkpoint it went on from
    "ParentCheckpointStep",  # ... and that checkpoint's step
)


@dataclass(frozen=True)
class TrialMarks:
    """Which trials meet the constraints (None: no constraints) and which are on the
    front (None: one objective)."""

    feasible: set[str] | None = None
    front: set[str] | None = None
    # PBT: each trial that went on from another's checkpoint -> (that trial, its step)
    parents: dict[str, tuple[int | None, int | None]] | None = None


def trial_marks(store: Store, record: TuningJobRecord) -> TrialMarks:
    goals = Goals.of_stored(record.spec_view)
    feasible = None
    if goals.constraints:
        feasible = {
            row.id
            for row in store.trials.results(record.id, list(JobStatus))
            if goals.feasible(TrialCosts.of(row))
        }
    front = front_of(store, record)
    return TrialMarks(
        feasible,
        None if front is None else {point.job_id for point in front},
        lineage(store, record),
    )


def lineage(
    store: Store, record: TuningJobRecord
) -> dict[str, tuple[int | None, int | None]] | None:
    """A PBT job's trials that went on from another's checkpoint: the trial and its step, as
    each trial's spec says (`checkpoint.start_from`). None for other strategies."""
    if not record.spec_view.is_pbt:
        return None
    trials = store.training_jobs_of(record.id)
    numbers = {trial.id: trial.trial_number for trial in trials}
    parents: dict[str, tuple[int | None, int | None]] = {}
    for trial in trials:
        start = trial.spec_view.start_from
        if start is not None:
            parents[trial.id] = (numbers.get(start.job), start.step)
    return parents


def analytics_rows(
    record: TuningJobRecord, trials: list[TrialRow], marks: TrialMarks | None = None
) -> list[dict[str, Any]]:
    """One row per training job: its tuned hyperparameters and the reference's columns
    (times as POSIX seconds); whether it meets the constraints, and is on the Pareto front
    (None where the job has no constraints, or one objective)."""
    tuned = record.spec_view.tuned
    rungs_of = _rungs_of(record)
    marks = marks or TrialMarks()
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
            "Feasible": None if marks.feasible is None else trial.id in marks.feasible,
            "ParetoFront": None if marks.front is None else trial.id in marks.front,
            **_parent_of(marks, trial.id),
        }
        for trial in trials
    ]


def _parent_of(marks: TrialMarks, job_id: str) -> dict[str, int | None]:
    parent, step = (marks.parents or {}).get(job_id, (None, None))
    return {"ParentTrial": parent, "ParentCheckpointStep": step}


def _rungs_of(record: TuningJobRecord) -> Callable[[TrialRow], dict[str, Any]]:
    """Each trial's Hyperband bracket and the rungs it reached (space-separated steps). The
    tuner records the bracket; a store from before it did draws it again from the seed and the
    trial's number (as Hyperband's fixed weights drew it)."""
    settings = record.spec_view.hyperband
    if settings is None:
        return lambda trial: {"HyperbandBracket": None, "RungsReached": None}
    brackets, weights = hyperband_brackets(
        settings.min_resource, settings.max_resource, settings.eta, settings.brackets
    )
    seed = record.spec_view.seed

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
    columns = [*record.spec_view.tuned, *ANALYTICS_COLUMNS]
    rows = analytics_rows(record, store.trials.rows(tuning_id), trial_marks(store, record))
    frame = pd.DataFrame(rows, columns=columns)
    for column in ("TrainingStartTime", "TrainingEndTime"):
        frame[column] = pd.to_datetime(frame[column], unit="s", utc=True)
    return frame


def _iso(stamp: float | None) -> str | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat()
