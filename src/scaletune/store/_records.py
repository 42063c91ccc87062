"""What the store holds, as typed records."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property
from typing import Any

from scaletune.store._stored_specs import StoredTrainingSpec, StoredTuningSpec

_PID = re.compile(r" pid \d+$")  # the end of a local worker's location


class JobStatus(StrEnum):
    PENDING = "Pending"
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"
    # A tuning trial that reached a rung of promotion-type Hyperband: its workers are free, its
    # checkpoint kept; it goes on (same job, a new attempt) if promoted, else its tuning job
    # ends it as Stopped.
    PAUSED = "Paused"

    @property
    def is_terminal(self) -> bool:
        return self in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.STOPPED)

    @property
    def has_run(self) -> bool:
        """No worker runs for it now, and what it ran is recorded: ended, or paused."""
        return self.is_terminal or self is JobStatus.PAUSED


@dataclass(frozen=True)
class NewTrainingJob:
    id: str
    name: str | None
    algorithm: str
    spec: dict[str, Any]
    hyperparameters: dict[str, Any]
    instance_count: int
    created_at: float
    log_dir: str
    tuning_job_id: str | None = None
    trial_number: int | None = None


@dataclass(frozen=True)
class JobOutcome:
    status: JobStatus
    start_time: float
    end_time: float
    wall_seconds: float
    billable_seconds: float
    final_metrics: dict[str, float]
    failure_reason: str | None = None
    artifact: str | None = None
    billable_by_class: dict[str, float] | None = None  # the billable seconds on each class


@dataclass(frozen=True)
class TrainingJobRecord:
    id: str
    name: str | None
    algorithm: str
    status: JobStatus
    spec: dict[str, Any]
    hyperparameters: dict[str, Any]
    instance_count: int
    created_at: float
    start_time: float | None
    end_time: float | None
    wall_seconds: float | None
    billable_seconds: float | None
    final_metrics: dict[str, float] = field(default_factory=dict)
    failure_reason: str | None = None
    artifact: str | None = None
    log_dir: str | None = None
    stop_requested: bool = False
    controller_pid: int | None = None
    controller_host: str | None = None
    tuning_job_id: str | None = None
    trial_number: int | None = None
    objective: float | None = None
    resource: int | None = None
    waiting_since: float | None = None  # its workers wait for room (Ray) since then
    requested_size: int | None = None  # an elastic job's size asked for by hand (`jobs resize`)
    # Its billable seconds on each capacity class; None for a job from before they were kept.
    billable_by_class: dict[str, float] | None = None

    @cached_property
    def spec_view(self) -> StoredTrainingSpec:
        """What readers need of the stored spec, typed (`spec` is the whole of it)."""
        return StoredTrainingSpec.of(self.spec)

    @property
    def cost_by_class(self) -> dict[str, float] | None:
        """Its cost on each capacity class at the prices its job file gave; None without."""
        return self.costs()

    def costs(self, prices: Mapping[str, float] | None = None) -> dict[str, float] | None:
        """Its cost on each capacity class at its job file's prices, else at `prices` (the
        store's, `scaletune prices`); None without either."""
        prices, billed = self.spec_view.prices or prices, self.billable_by_class
        if prices is None or billed is None:
            return None
        return {name: seconds * prices.get(name, 0.0) for name, seconds in billed.items()}

    @property
    def size_range(self) -> tuple[int, int] | None:
        """An elastic job's fewest and most workers; None for a job of a fixed size."""
        fewest = self.spec_view.min_instance_count
        if fewest is None or fewest >= self.instance_count:
            return None
        return int(fewest), self.instance_count

    def to_json_dict(self) -> dict[str, Any]:
        """The job as scripts read it (`--json`): ISO 8601 times, plain values."""
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status.value,
            "algorithm": self.algorithm,
            "instance_count": self.instance_count,
            "hyperparameters": self.hyperparameters,
            "created_time": _iso(self.created_at),
            "start_time": _iso(self.start_time),
            "end_time": _iso(self.end_time),
            "wall_seconds": self.wall_seconds,
            "billable_seconds": self.billable_seconds,
            "final_metrics": self.final_metrics,
            "failure_reason": self.failure_reason,
            "artifact": self.artifact,
            "log_dir": self.log_dir,
            "stop_requested": self.stop_requested,
            "tuning_job_id": self.tuning_job_id,
            "trial_number": self.trial_number,
            "objective": self.objective,
            "resource": self.resource,
            "waiting_since": _iso(self.waiting_since),
            "requested_size": self.requested_size,
            "billable_by_class": self.billable_by_class,
            "cost_by_class": self.cost_by_class,
            "spec": self.spec,
        }


@dataclass(frozen=True)
class NewTuningJob:
    id: str
    name: str | None
    strategy: str
    spec: dict[str, Any]
    created_at: float


@dataclass(frozen=True)
class TuningJobRecord:
    id: str
    name: str | None
    strategy: str
    status: JobStatus
    spec: dict[str, Any]
    created_at: float
    start_time: float | None
    end_time: float | None
    wall_seconds: float | None
    best_training_job: str | None
    best_objective: float | None
    failure_reason: str | None
    stop_requested: bool
    controller_pid: int | None
    controller_host: str | None
    lease_holder: str | None = None  # the controller that runs it (`tuning._lease`)
    lease_expires: float | None = None  # until when, unless it renews
    # A Completed one: why it ended when it did (max_jobs reached, or a rule ended it sooner).
    completion_reason: str | None = None

    @cached_property
    def spec_view(self) -> StoredTuningSpec:
        """What readers need of the stored spec, typed (`spec` is the whole of it)."""
        return StoredTuningSpec.of(self.spec)


@dataclass(frozen=True)
class NoticeRecord:
    """A worker told that its machine leaves (a spot VM's preemption, a pod's shutdown, a
    drained node, or `jobs notice`): the job saves a checkpoint and goes on without it."""

    attempt: int
    rank: int
    seconds: float  # from given_at until the machine goes
    source: str  # "SIGTERM", "jobs notice", ...
    given_at: float

    @property
    def deadline(self) -> float:
        return self.given_at + self.seconds

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "rank": self.rank,
            "seconds": self.seconds,
            "source": self.source,
            "given_at": _iso(self.given_at),
        }


@dataclass(frozen=True)
class AttemptRecord:
    """One run of a job's worker group: the first, a retry, or a resume by hand."""

    number: int
    start_time: float
    end_time: float | None
    status: JobStatus  # how it ended; InProgress while it runs
    reason: str | None
    retried: bool  # another attempt followed automatically
    resumed_from_step: int | None  # the checkpoint it started from; None: from the start
    steps_redone: int | None  # reported steps past that checkpoint that it ran again
    checkpoint_step: int | None  # its latest complete checkpoint
    workers: tuple[str, ...] = ()  # where each rank ran; empty before it was placed

    @property
    def size(self) -> int:
        """Its workers (processes, a TensorFlow chief and servers included); 0 if never placed."""
        return len(self.workers)

    @property
    def placement(self) -> str | None:
        """Where its workers ran, by machine: "2 on node-a, 1 on node-b" (pids left out)."""
        machines = Counter(_PID.sub("", location) for location in self.workers)
        return ", ".join(f"{count} on {machine}" for machine, count in machines.items()) or None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "start_time": _iso(self.start_time),
            "end_time": _iso(self.end_time),
            "status": self.status.value,
            "reason": self.reason,
            "retried": self.retried,
            "resumed_from_step": self.resumed_from_step,
            "steps_redone": self.steps_redone,
            "checkpoint_step": self.checkpoint_step,
            "workers": list(self.workers),
        }


@dataclass(frozen=True)
class Resize:
    """An elastic job that went on at another size: when the new size began, and why the
    attempt before it ended (a worker lost, capacity back, a size asked for)."""

    time: float
    from_size: int
    to_size: int
    reason: str | None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "time": _iso(self.time),
            "from": self.from_size,
            "to": self.to_size,
            "why": self.reason,
        }


def resizes(attempts: Sequence[AttemptRecord]) -> list[Resize]:
    """Each attempt placed at another size than the one placed before it."""
    changes: list[Resize] = []
    before: AttemptRecord | None = None
    for attempt in attempts:
        if not attempt.workers:  # never placed (stopped while it waited for room)
            continue
        if before is not None and attempt.size != before.size:
            changes.append(Resize(attempt.start_time, before.size, attempt.size, before.reason))
        before = attempt
    return changes


@dataclass(frozen=True)
class MetricPoint:
    name: str
    step: int
    value: float
    time: float


@dataclass(frozen=True)
class RejectedMetric:
    """A reported value that was not recorded because it is not a finite number."""

    name: str
    step: int
    value: str
    time: float


def _iso(stamp: float | None) -> str | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat()
