"""Stopping a job from outside its controller (`jobs stop`, the console's Stop button): the
same rules wherever the request comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scaletune.store import JobStatus
from scaletune.training._orphans import reconcile_orphan

if TYPE_CHECKING:
    from scaletune.store import Store


@dataclass(frozen=True)
class StopRequest:
    status: JobStatus  # the job's status once the request is recorded
    message: str


def request_job_stop(store: Store, job_id: str, now: float, via: str) -> StopRequest:
    """A running job is flagged (its controller ends the workers at its next poll, or the
    job is marked ended if that controller is gone); a paused one is Stopped at once."""
    record = store.get_training_job(job_id)
    if record.status.is_terminal:
        return StopRequest(record.status, f"job {job_id} already ended: {record.status.value}")
    if record.status is JobStatus.PAUSED and store.end_paused_training_job(
        job_id, f"stopped while paused ({via}): it will not be promoted"
    ):
        return StopRequest(JobStatus.STOPPED, f"job {job_id} was paused; now Stopped")
    store.request_stop(job_id)
    record = reconcile_orphan(store, store.get_training_job(job_id), now)
    return StopRequest(
        record.status, f"stop requested for job {job_id} (status {record.status.value})"
    )


def request_tuning_stop(store: Store, tuning_id: str) -> StopRequest:
    """Its running trials are stopped and no new ones start (by its controller)."""
    record = store.get_tuning_job(tuning_id)
    if record.status.is_terminal:
        return StopRequest(
            record.status, f"tuning job {tuning_id} already ended: {record.status.value}"
        )
    store.request_tuning_stop(tuning_id)
    return StopRequest(record.status, f"stop requested for tuning job {tuning_id}")
