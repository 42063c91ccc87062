"""A running job when its store goes away: the PostgreSQL server restarted mid-job, SQLite's
write lock held by another process. The workers train on; every report lands once."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scaletune.api import Session
from scaletune.cluster import LocalBackend
from scaletune.spec import TrainingJobSpec, training_spec_from_dict
from scaletune.store import JobStatus
from scaletune.store import _engine as engine_module
from scaletune.worker import Report
from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (a fixture)

ROUNDS = 30


def _spec() -> TrainingJobSpec:
    channel = {"dataset": "breast-cancer"}
    return training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "instance_count": 2,
            "hyperparameters": {"num_round": ROUNDS, "max_depth": 3, "eval_metric": "auc"},
            "channels": {"train": channel, "validation": channel},
            "checkpoint": {"every_steps": 5, "every_seconds": None},
        }
    )


class _Outage(logging.Handler):
    """Takes the store away as the job reports step 3; brings it back once the store was
    found away (a write failed) and the workers made their last report meanwhile."""

    def __init__(self, away: Callable[[], None], back: Callable[[], None]) -> None:
        super().__init__()
        self._away = away
        self._failed, self._last = threading.Event(), threading.Event()
        self._returns = threading.Thread(target=self._bring_back, args=(back,))
        self.reported: list[tuple[str, int]] = []

    def __call__(self, report: Report) -> None:
        self.reported.extend((name, report.step) for name in report.metrics)
        if report.step == 3:
            self._away()
            self._returns.start()
        elif report.step == ROUNDS:
            self._last.set()

    def emit(self, record: logging.LogRecord) -> None:
        if "does not answer" in record.getMessage():
            self._failed.set()

    def _bring_back(self, back: Callable[[], None]) -> None:
        self._failed.wait(120)
        self._last.wait(120)
        back()

    def __enter__(self) -> _Outage:
        logging.getLogger("scaletune.store").addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("scaletune.store").removeHandler(self)
        assert self._failed.is_set() and self._last.is_set()


def _run_through(session: Session, outage: _Outage) -> None:
    controller = session.controller
    record = controller.run(controller.prepare(_spec()), on_report=outage)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    stored = Counter((p.name, p.step) for p in session.store.metrics(record.id))
    assert stored == Counter(outage.reported)  # each report the workers made, once
    assert set(stored.values()) == {1}
    assert max(step for _, step in stored) == ROUNDS
    [attempt] = session.store.attempts.of(record.id)
    assert attempt.checkpoint_step == ROUNDS  # the checkpoints' marks came after their reports
    assert not Path(record.log_dir or "").parent.joinpath("unsent-reports.jsonl").exists()


@pytest.fixture
def backend() -> Iterator[LocalBackend]:
    with LocalBackend() as opened:
        yield opened


@pytest.mark.postgres
def test_a_job_trains_on_through_a_postgresql_restart_and_stores_every_report_once(
    postgres_server: PostgresServer,  # noqa: F811
    backend: LocalBackend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("SCALETUNE_HOME", str(tmp_path))
    caplog.set_level("WARNING", logger="scaletune.store")
    outage = _Outage(postgres_server.stop, postgres_server.start)
    with Session(postgres_server.url, backend=backend) as session, outage:
        _run_through(session, outage)
    assert any("does not answer" in message for message in caplog.messages)
    assert any("answers again" in message for message in caplog.messages)


_HOLD_THE_LOCK = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.readline()
connection.execute("ROLLBACK")
"""


class _LockHolder:
    """Another process holding the SQLite store's write lock while the test wants it held."""

    def __init__(self, database: Path) -> None:
        self._database = database
        self._process: subprocess.Popen[str] | None = None

    def take(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _HOLD_THE_LOCK, str(self._database)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None and self._process.stdout.readline() == "held\n"

    def release(self) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write("\n")
        self._process.stdin.flush()
        self._process.wait(30)


def test_a_job_waits_out_another_process_holding_sqlites_write_lock(
    store_path: Path,
    backend: LocalBackend,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # SQLite's own wait (busy_timeout) made short, so that the store's patience takes over.
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 100)
    caplog.set_level("WARNING", logger="scaletune.store")
    holder = _LockHolder(store_path)
    outage = _Outage(holder.take, holder.release)
    with Session(store_path, backend=backend) as session, outage:
        _run_through(session, outage)
    assert any("database is locked" in message for message in caplog.messages)
