"""The Python API's job handles stop through the same rule as `jobs stop` and the console."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scaletune.api import TrainingJob
from scaletune.api._tuner import TuningJob
from scaletune.store import JobOutcome, JobStatus, NewTrainingJob, NewTuningJob, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'api.db'}") as opened:
        yield opened


def _paused_trial(store: Store) -> str:
    store.create_training_job(
        NewTrainingJob("t-000", None, "xgboost", {}, {}, 2, 1.0, "", "t", trial_number=0)
    )
    store.finish_training_job(
        "t-000",
        JobOutcome(JobStatus.PAUSED, 1.0, 2.0, 1.0, 2.0, {}, failure_reason="bracket 0 rung 1"),
    )
    return "t-000"


def test_stopping_a_paused_trial_from_python_ends_it_at_once(store: Store) -> None:
    """A Paused trial has no workers to ask: as with `jobs stop`, it becomes Stopped at once
    (asking its absent controller left it Paused, to be promoted later)."""
    job = TrainingJob(_paused_trial(store), store)
    job.stop()
    record = store.get_training_job(job.id)
    assert (record.status, record.failure_reason) == (
        JobStatus.STOPPED,
        "stopped while paused (Python API): it will not be promoted",
    )
    job.stop()  # already ended: nothing changes
    assert store.get_training_job(job.id).status is JobStatus.STOPPED


def test_stopping_an_ended_tuning_job_from_python_changes_nothing(store: Store) -> None:
    store.create_tuning_job(NewTuningJob("tuning-1", None, "Hyperband", {}, created_at=1.0))
    store.finish_tuning_job("tuning-1", JobStatus.COMPLETED, 5.0, 4.0)
    TuningJob("tuning-1", store).stop()
    record = store.get_tuning_job("tuning-1")
    assert (record.status, record.stop_requested) == (JobStatus.COMPLETED, False)
