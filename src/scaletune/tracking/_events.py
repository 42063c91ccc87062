"""What a tracker is told of a job: its start, each report, its end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from scaletune.store import JobStatus, MetricPoint


@dataclass(frozen=True)
class TrackedJob:
    """A training job as trackers see it when an attempt of it starts."""

    id: str
    name: str | None
    algorithm: str
    hyperparameters: Mapping[str, object]
    instance_count: int
    backend: str
    start_time: float
    tuning_job_id: str | None = None
    trial_number: int | None = None
    # Reports already in the store (inherited from another job's checkpoint, or from an earlier
    # run of a resumed job): a tracker that has not seen the job yet records them first.
    earlier_metrics: Sequence[MetricPoint] = ()
    # Never started before: no tracker can have a run of it yet, so none is looked for.
    new: bool = False


@dataclass(frozen=True)
class JobEnd:
    status: JobStatus
    end_time: float
    wall_seconds: float
    billable_seconds: float
    attempts: int  # every attempt of every run of the job (retries and resumes)
    final_metrics: Mapping[str, float] = field(default_factory=dict)
    failure_reason: str | None = None
    model: Path | None = None  # the published model folder, when the job completed
    stopped_early: bool = False  # Stopped by a tuning job's early stopping, not by hand


@dataclass(frozen=True)
class TrackedTuning:
    id: str
    name: str | None
    strategy: str
    objective_metric: str
    objective_type: str
    ranges: Mapping[str, Mapping[str, object]]  # name -> the range as stored (type, bounds)
    settings: Mapping[str, object]  # max_jobs, max_parallel_jobs, ...: the parent run's params
    start_time: float


@dataclass(frozen=True)
class TuningEnd:
    status: JobStatus
    end_time: float
    best_job_id: str | None
    best_objective: float | None
    trials: int


class JobTracker(Protocol):
    """One training job's run in a tracking system; never raises, never blocks the job."""

    def report(self, step: int, metrics: Mapping[str, float], time: float) -> None: ...

    def finish(self, end: JobEnd) -> None: ...


class TuningTracker(Protocol):
    def finish(self, end: TuningEnd) -> None: ...
