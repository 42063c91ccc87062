"""A store with a simulated tuning job (trials of 1 to 3 workers, some stopped by Hyperband)
and one training job whose log holds markup, and a console app over it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from scaletune.console import Access, create_app
from scaletune.store import (
    JobOutcome,
    JobStatus,
    MetricPoint,
    NewTrainingJob,
    Store,
    TuningJobRecord,
)
from tests.simulated import simulated_tuning

HOSTILE_LOG = '<script>alert("log")</script> epoch=1 & <b>bold</b>\n'


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'console.db'}") as opened:
        yield opened


@pytest.fixture
def tuning(store: Store) -> TuningJobRecord:
    return simulated_tuning(store, 30)


def add_job(store: Store, tmp_path: Path, job_id: str = "hand-made", log: str = HOSTILE_LOG) -> str:
    logs = tmp_path / "logs" / job_id
    logs.mkdir(parents=True)
    (logs / "worker-0.log").write_text(log)
    store.create_training_job(
        NewTrainingJob(
            id=job_id,
            name=None,
            algorithm="script",
            spec={"cluster": {"backend": "local"}},
            hyperparameters={"epochs": 3},
            instance_count=2,
            created_at=time.time(),
            log_dir=str(logs),
        )
    )
    return job_id


def add_elastic_job(store: Store, job_id: str = "elastic") -> str:
    """A job of 2 to 4 workers that lost one and grew back: attempts of 4, 3 and 4."""
    store.create_training_job(
        NewTrainingJob(
            id=job_id,
            name=None,
            algorithm="dnn",
            spec={"instance_count": 4, "min_instance_count": 2},
            hyperparameters={},
            instance_count=4,
            created_at=100.0,
            log_dir="",
        )
    )
    store.mark_in_progress(job_id, 100.0, 1, "here")
    for number, (start, end, size, status, reason) in enumerate(
        [
            (100.0, 110.0, 4, JobStatus.FAILED, "worker 3 exited unexpectedly"),
            (111.0, 125.0, 3, JobStatus.STOPPED, "resized to 4 workers: room for more"),
            (126.0, 140.0, 4, JobStatus.COMPLETED, None),
        ],
        start=1,
    ):
        store.attempts.start(job_id, number, start)
        store.attempts.set_workers(job_id, number, [f"here pid {rank}" for rank in range(size)])
        store.attempts.end(
            job_id, number, status=status, end_time=end, reason=reason, retried=number < 3
        )
    store.append_metrics(job_id, [MetricPoint("validation:accuracy", 1, 0.9, 105.0)])
    store.finish_training_job(
        job_id, JobOutcome(JobStatus.COMPLETED, 100.0, 140.0, 40.0, 148.0, {})
    )
    return job_id


def client(store: Store, access: Access | None = None, host: str = "127.0.0.1") -> TestClient:
    app = create_app(store, access or Access(token=None), allowed_hosts=["127.0.0.1"])
    return TestClient(app, base_url=f"http://{host}", follow_redirects=False)


__all__ = ["HOSTILE_LOG", "JobStatus", "add_elastic_job", "add_job", "client"]
