"""The store against a PostgreSQL server that goes away for real: stopped and started again,
a connection terminated mid-write, a command run while it is down."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from scaletune.errors import StoreUnavailableError
from scaletune.store import JobStatus, MetricPoint, NewTrainingJob, Patience, Store
from tests.cli.test_cli import _cli
from tests.conftest import wait_until
from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (a fixture)

pytestmark = pytest.mark.postgres


def _job(job_id: str = "job-1") -> NewTrainingJob:
    return NewTrainingJob(
        id=job_id,
        name=None,
        algorithm="xgboost",
        spec={},
        hyperparameters={},
        instance_count=2,
        created_at=1.0,
        log_dir="logs",
    )


class _Waits:
    """A patience's sleep that tells the test when the store first failed to answer."""

    def __init__(self) -> None:
        self.failed = threading.Event()

    def sleep(self, seconds: float) -> None:
        self.failed.set()
        time.sleep(seconds)


def _in_thread(work: object) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(work())  # type: ignore[operator]
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_write_while_the_server_restarts_waits_and_lands_once(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    waits = _Waits()
    with Store(postgres_server.url, Patience(seconds=120, sleep=waits.sleep)) as store:
        store.create_training_job(_job())
        postgres_server.stop()
        point = MetricPoint("validation:auc", 1, 0.9, 10.0)
        thread, outcome = _in_thread(lambda: store.append_metrics("job-1", [point]))
        assert waits.failed.wait(60)
        postgres_server.start()
        thread.join(120)
        assert outcome == [None]
        assert store.metrics("job-1") == [point]
        assert store.get_training_job("job-1").status is JobStatus.PENDING


def test_a_connection_terminated_mid_write_is_written_once(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    with Store(postgres_server.url, Patience(seconds=60)) as store:
        store.create_training_job(_job())
        admin = create_engine(postgres_server.url.replace("postgresql://", "postgresql+psycopg://"))
        try:
            with admin.connect() as conn:
                # The write waits on this lock: it is mid-write when its connection is cut.
                conn.execute(text("LOCK TABLE metric_points IN ACCESS EXCLUSIVE MODE"))
                points = [MetricPoint("loss", step, 1.0 / step, float(step)) for step in (1, 2)]
                thread, outcome = _in_thread(lambda: store.append_metrics("job-1", points))
                waiting = "wait_event_type = 'Lock'"
                wait_until(lambda: postgres_server.terminate_connections(waiting) == 1)
                conn.rollback()  # the lock goes; the write tries again on a new connection
            thread.join(60)
        finally:
            admin.dispose()
        assert outcome == [None]
        assert store.metrics("job-1") == points


def test_an_outage_longer_than_the_patience_raises_one_line(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    with Store(postgres_server.url, Patience(seconds=0.5)) as store:
        postgres_server.stop()
        with pytest.raises(StoreUnavailableError, match=r"^store '.*' did not answer for 0\.5 s"):
            store.get_training_job("job-1")


def test_the_reads_over_trials_and_pages_wait_out_a_restart_too(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    # `tuning list` summarises through store.trials, the console's pages through store.browse:
    # the soak saw such a read fail with a bare OperationalError (exit 1) during a restart.
    with Store(postgres_server.url, Patience(seconds=0.5)) as hurried:
        postgres_server.stop()
        for read in (
            lambda: hurried.trials.totals("tuning-1", None),
            lambda: hurried.trials.rows("tuning-1"),
            lambda: hurried.browse.counts(),
            lambda: hurried.browse.change_mark(),
        ):
            with pytest.raises(StoreUnavailableError, match=r"did not answer for 0\.5 s"):
                read()
        postgres_server.start()
    waits = _Waits()
    with Store(postgres_server.url, Patience(seconds=120, sleep=waits.sleep)) as store:
        store.create_training_job(_job())
        postgres_server.stop()

        def reads() -> tuple[int, dict[JobStatus, int]]:
            return store.trials.totals("tuning-1", None).trials, store.browse.counts()

        thread, outcome = _in_thread(reads)
        assert waits.failed.wait(60)
        postgres_server.start()
        thread.join(120)
        assert len(outcome) == 1 and isinstance(outcome[0], tuple), outcome
        trials, counts = outcome[0]
        assert trials == 0 and counts[JobStatus.PENDING] == 1


def test_a_command_during_an_outage_says_so_in_one_line_exits_3_and_changes_nothing(
    postgres_server: PostgresServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCALETUNE_HOME", str(tmp_path))
    with Store(postgres_server.url) as store:
        store.create_training_job(_job())
    postgres_server.stop()
    for command in (["jobs", "list"], ["jobs", "stop", "job-1"]):
        code, out, err = _cli(capsys, *command, "--store", postgres_server.url)
        assert code == 3, err
        assert out == ""
        assert err.count("\n") == 1
        assert err.startswith(f"error: store '{postgres_server.url}' is unreachable: ")
    postgres_server.start()
    with Store(postgres_server.url) as store:
        assert not store.get_training_job("job-1").stop_requested
