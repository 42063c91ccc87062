"""A straggler among real workers (held with SIGSTOP, or slowed): under `max_staleness` the
others go k pushes ahead of it and wait; with backup workers the rounds go on without it, and
its late gradient is dropped, never applied."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from scaletune.api import Estimator, Session
from scaletune.store import JobStatus
from tests.algorithms.dnn.test_distributed_dnn import CHANNELS, PS_ASYNC, PS_SYNC, SMALL, _fit
from tests.cluster import programs
from tests.conftest import wait_until
from tests.jobs import run_job

HELD = re.compile(
    r"parameter server: worker (\d) waits at push (\d+) for worker 2, at (\d+) pushes "
    r"\(max_staleness 2\)"
)


def _server_log(log_dir: str | None) -> str:
    """Rank 0's log, where the server (in its process) says whom it waits for."""
    assert log_dir is not None
    path = Path(log_dir) / "worker-0.log"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def test_a_stopped_worker_holds_the_others_once_they_are_k_pushes_ahead_and_no_earlier(
    session: Session,
) -> None:
    job = _fit(session, 3, {**PS_ASYNC, "max_staleness": 2}, epochs=10_000)
    wait_until(lambda: len(job.metrics()) > 0, timeout=60)
    log_dir = job.describe().log_dir
    straggler = job.worker_pids[2]
    os.kill(straggler, signal.SIGSTOP)
    try:
        # The server says so once a wait has lasted 3 s: both others are held.
        wait_until(
            lambda: {m[0] for m in HELD.findall(_server_log(log_dir))} == {"0", "1"}, timeout=60
        )
    finally:
        os.kill(straggler, signal.SIGCONT)
        job.stop()
        record = job.wait(timeout=60)
    assert record.status is JobStatus.STOPPED, record.failure_reason
    held = HELD.findall(_server_log(log_dir))
    # Each went on while at most k = 2 ahead of the stopped worker, and its push that made
    # it k + 1 ahead was applied and then held: not one push fewer, not one more.
    assert sorted((rank, int(at) - int(slowest)) for rank, at, slowest in held) == [
        ("0", 3),
        ("1", 3),
    ], held


def test_rounds_go_on_without_a_stopped_worker_and_its_late_gradient_is_dropped(
    session: Session,
) -> None:
    job = _fit(session, 3, {**PS_SYNC, "backup_workers": 1}, epochs=10_000)

    def epochs() -> int:
        return len(job.metrics("validation:accuracy"))

    wait_until(lambda: epochs() > 0, timeout=60)
    straggler = job.worker_pids[2]
    os.kill(straggler, signal.SIGSTOP)
    try:
        # Epochs close while it is stopped: the rounds need 2 gradients of 3.
        reported = epochs()
        wait_until(lambda: epochs() >= reported + 2, timeout=60)
        os.kill(straggler, signal.SIGCONT)
        # Its first push after it goes on is late; the epoch it falls in is reported.
        reported = epochs()
        wait_until(lambda: epochs() >= reported + 2, timeout=60)
    finally:
        os.kill(straggler, signal.SIGCONT)
        job.stop()
        record = job.wait(timeout=60)
    assert record.status is JobStatus.STOPPED, record.failure_reason
    dropped = job.metrics("ps:dropped")["value"]
    # Its gradient came after the round it was computed for: at least one dropped ...
    assert dropped.sum() >= 1
    # ... and none applied late: every gradient applied was computed on the weights it
    # was applied to.
    assert (job.metrics("ps:staleness_max")["value"] == 0).all()


def test_an_all_reduce_job_with_backup_workers_and_a_slow_worker_completes_counting_drops(
    session: Session,
) -> None:
    """A frozen process would hold any collective; a slow one computes while its round
    thread keeps up with the rounds, which take the first two gradients of three. Whether the
    slow worker computes at all is the scheduler's: one that finds each round full skips it
    and drops nothing. That a late gradient is dropped and never applied is held in
    test_backup_rounds.py."""
    spec = Estimator(
        "dnn",
        {**SMALL, "epochs": 2},
        instance_count=3,
        distribution={"strategy": "allreduce", "backup_workers": 1},
        session=session,
    ).spec(CHANNELS)
    record = run_job(session, spec, programs.dnn_rank2_slowed)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    dropped = session.store.metrics(record.id, "allreduce:dropped")
    assert [point.step for point in dropped] == [1, 2]  # each epoch once, with its drops
    assert record.final_metrics["validation:accuracy"] > 0.7
