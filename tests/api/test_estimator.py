from __future__ import annotations

from pathlib import Path

import pytest

from scaletune import ChannelSpec, Estimator, InvalidInputError, Session
from scaletune.api import ChannelInput
from scaletune.cluster import LocalBackend
from scaletune.store import JobStatus
from tests.conftest import pid_alive, wait_until

DIGITS: dict[str, ChannelInput] = {
    "train": ChannelSpec(dataset="breast-cancer"),
    "validation": {"dataset": "breast-cancer"},
}


def test_fit_waits_and_returns_a_handle(session: Session) -> None:
    job = Estimator(
        "xgboost",
        {"num_round": 3, "eval_metric": ["auc", "logloss"]},
        instance_count=2,
        session=session,
    ).fit(DIGITS)
    record = job.describe()
    assert record.status is JobStatus.COMPLETED
    metrics = job.metrics()
    assert list(metrics.columns) == ["name", "step", "value", "time"]
    assert set(metrics["name"]) == {
        "train:auc",
        "train:logloss",
        "validation:auc",
        "validation:logloss",
    }
    assert str(metrics["time"].dtype).startswith("datetime64")
    assert len(job.metrics("validation:auc")) == 3
    assert job.wait().status is JobStatus.COMPLETED


def test_fit_without_waiting_then_stop(session: Session) -> None:
    job = Estimator(
        "xgboost", {"num_round": 100_000, "max_depth": 2}, instance_count=2, session=session
    ).fit(DIGITS, wait=False)
    wait_until(lambda: len(job.metrics()) > 0)
    assert len(job.worker_pids) == 2
    job.stop()
    record = job.wait(timeout=60)
    assert record.status is JobStatus.STOPPED
    assert job.worker_pids == []


def test_wait_with_a_timeout(session: Session) -> None:
    job = Estimator(
        "xgboost", {"num_round": 100_000, "max_depth": 2}, instance_count=1, session=session
    ).fit(DIGITS, wait=False)
    with pytest.raises(TimeoutError, match="still running"):
        job.wait(timeout=0.01)
    job.stop()
    assert job.wait(timeout=60).status is JobStatus.STOPPED


def test_bad_estimators_are_refused(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="instance_count"):
        Estimator("xgboost", instance_count=0, session=session).fit(DIGITS)
    with pytest.raises(InvalidInputError, match=r"hyperparameters\.eta"):
        Estimator("xgboost", {"eta": "fast"}, session=session).fit(DIGITS)
    assert session.store.list_training_jobs() == []


def test_a_session_of_its_own(store_path: Path) -> None:
    job = Estimator("xgboost", {"num_round": 2}, instance_count=1).fit(DIGITS)
    assert job.describe().status is JobStatus.COMPLETED
    with Session() as session:  # the same default store
        assert [r.id for r in session.store.list_training_jobs()] == [job.id]


def test_a_session_starts_a_fork_server_for_a_job_not_to_read_or_to_refuse(
    store_path: Path,
) -> None:
    with Session() as session:
        backend = session.backend
        assert isinstance(backend, LocalBackend)
        assert session.store.list_training_jobs() == []
        with pytest.raises(InvalidInputError, match=r"hyperparameters\.eta"):
            Estimator("xgboost", {"eta": "fast"}, session=session).fit(DIGITS)
        assert backend.server_pids == []
        # Once its spec passes, a job being prepared starts it, before its data loads.
        session.controller.prepare(Estimator("xgboost", {"num_round": 2}).spec(DIGITS))
        (server,) = backend.server_pids
        assert pid_alive(server)
    wait_until(lambda: not pid_alive(server), timeout=10)


def test_an_estimator_may_be_elastic() -> None:
    estimator = Estimator(
        "xgboost", {"num_round": 5}, instance_count={"min": 1, "max": 3}, checkpoint={}
    )
    spec = estimator.spec({"train": {"dataset": "breast-cancer"}})
    assert spec.elastic and (spec.min_workers, spec.instance_count) == (1, 3)
    with pytest.raises(InvalidInputError, match="min=4 is more than max=3"):
        Estimator("xgboost", instance_count={"min": 4, "max": 3}).spec(
            {"train": {"dataset": "breast-cancer"}}
        )
