"""A Hyperband tuning job on real 2-worker trials whose PostgreSQL store is restarted mid-run:
it completes, every report its trials made stored once, no trial counted twice."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaletune.api import Session
from scaletune.cluster import LocalBackend
from scaletune.store import JobStatus
from scaletune.training import PreparedJob, Stopper
from scaletune.tuning import TuningController
from scaletune.worker import Report
from tests.cluster import programs
from tests.conftest import wait_until
from tests.jobs import ProgramOverride
from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (a fixture)
from tests.tuning.test_tuner import _spec

pytestmark = pytest.mark.postgres


class _Restart(logging.Handler):
    """Stops the server once the trials have reported; starts it again once a write found
    it away and the trials made five more reports meanwhile (or ran out of them)."""

    def __init__(self, server: PostgresServer) -> None:
        super().__init__()
        self.server = server
        self.reported: list[tuple[str, str, int]] = []
        self.failed = threading.Event()
        self._reports_lock = threading.Lock()
        self.made_while_away = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "does not answer" in record.getMessage():
            self.failed.set()

    def seen(self, job_id: str, report: Report) -> None:
        with self._reports_lock:
            self.reported.extend((job_id, name, report.step) for name in report.metrics)

    def count(self) -> int:
        with self._reports_lock:
            return len(self.reported)

    def run(self) -> None:
        wait_until(lambda: self.count() > 10, timeout=120)
        self.server.stop()
        try:
            stopped_at = self.count()
            self.failed.wait(120)
            # Five more reports, unless the trials running run out of them first (the tuner
            # waits for the store before it starts another).
            wait_until(lambda: self.count() >= stopped_at + 5 or self._quiet(), timeout=120)
            self.made_while_away = self.count() - stopped_at
        finally:
            self.server.start()

    def _quiet(self) -> bool:
        """No report for a second: the trials that were running have ended."""
        before = self.count()
        threading.Event().wait(1.0)
        return self.count() == before


@pytest.fixture
def backend() -> Iterator[LocalBackend]:
    with LocalBackend() as opened:
        yield opened


def test_a_hyperband_tuning_job_completes_through_a_restart_with_every_report_once(
    postgres_server: PostgresServer,  # noqa: F811
    backend: LocalBackend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCALETUNE_HOME", str(tmp_path))
    restart = _Restart(postgres_server)
    logging.getLogger("scaletune.store").addHandler(restart)
    try:
        with Session(postgres_server.url, backend=backend) as session:
            controller = session.controller
            run = controller.run

            def observed(job: PreparedJob, stop: Stopper | None = None, **kw: Any) -> Any:
                told = kw.pop("on_report", None)
                # Paced, so that trials are mid-run when the server stops.
                paced = programs.xgboost_a_tenth_of_a_second_a_round
                job = dataclasses.replace(job, algorithm=ProgramOverride(job.algorithm, paced))

                def on_report(report: Report) -> None:
                    restart.seen(job.id, report)
                    if told is not None:
                        told(report)

                return run(job, stop, on_report=on_report, **kw)

            monkeypatch.setattr(controller, "run", observed)
            restarter = threading.Thread(target=restart.run)
            restarter.start()
            spec = _spec(max_jobs=6)
            tuner = TuningController(controller, poll_seconds=0.05)
            tuning_id = tuner.create(spec)
            record = tuner.run(tuning_id, spec)
            restarter.join(120)
            assert record.status is JobStatus.COMPLETED, record.failure_reason
            trials = session.store.training_jobs_of(tuning_id)
            assert [t.trial_number for t in trials] == list(range(6))
            assert all(t.status in (JobStatus.COMPLETED, JobStatus.STOPPED) for t in trials)
            stored = Counter(
                (t.id, p.name, p.step) for t in trials for p in session.store.metrics(t.id)
            )
            assert stored == Counter(restart.reported)
            assert set(stored.values()) == {1}
    finally:
        logging.getLogger("scaletune.store").removeHandler(restart)
    assert restart.failed.is_set()
    assert restart.made_while_away > 0  # the trials trained on while the store was away
