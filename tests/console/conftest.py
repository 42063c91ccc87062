"""A store with a simulated tuning job (trials of 1 to 3 workers, some stopped by Hyperband)
and one training job whose log holds markup, and a console app over it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from scaletune.console import Access, create_app
from scaletune.store import JobStatus, NewTrainingJob, Store, TuningJobRecord
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


def client(store: Store, access: Access | None = None, host: str = "127.0.0.1") -> TestClient:
    app = create_app(store, access or Access(token=None), allowed_hosts=["127.0.0.1"])
    return TestClient(app, base_url=f"http://{host}", follow_redirects=False)


__all__ = ["HOSTILE_LOG", "JobStatus", "add_job", "client"]
