"""Retries with real kills: a worker killed (SIGKILL) or stopped (SIGSTOP) mid-job, and the
job resumed from its latest checkpoint by a new attempt of the same group size."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path
from typing import Any

import pytest

from scaletune.api import Session
from scaletune.checkpoints import CheckpointFolder
from scaletune.spec import TrainingJobSpec, training_spec_from_dict
from scaletune.store import JobStatus, TrainingJobRecord
from scaletune.training import Stopper
from scaletune.worker import WorkerProgram
from tests.cluster import programs
from tests.conftest import pid_alive
from tests.jobs import ProgramOverride, run_job


def _spec(**fields: Any) -> TrainingJobSpec:
    channel = {"dataset": "breast-cancer"}
    raw: dict[str, Any] = {
        "algorithm": "xgboost",
        "instance_count": 3,
        "hyperparameters": {"num_round": 12, "max_depth": 3, "eval_metric": "auc"},
        "channels": {"train": channel, "validation": channel},
        "checkpoint": {"every_steps": 4, "every_seconds": None},
    }
    raw.update(fields)
    return training_spec_from_dict(raw)


def _run(session: Session, spec: TrainingJobSpec, program: WorkerProgram | None = None):
    pids: list[int] = []
    record = run_job(session, spec, program, on_started=lambda group: pids.extend(group.pids))
    return record, pids


def _validation_auc(session: Session, record: TrainingJobRecord) -> list[tuple[int, float]]:
    return [(p.step, p.value) for p in session.store.metrics(record.id, "validation:auc")]


SAMPLING = {"subsample": 0.8, "colsample_bytree": 0.7, "colsample_bylevel": 0.5}


@pytest.mark.parametrize("sampling", [{}, SAMPLING], ids=["all-rows", "sampled-rows-columns"])
def test_a_killed_worker_is_retried_from_the_checkpoint_and_gives_the_same_model(
    session: Session, sampling: dict[str, float]
) -> None:
    hyperparameters = {"num_round": 12, "max_depth": 3, "eval_metric": "auc", **sampling}
    spec = _spec(hyperparameters=hyperparameters)
    plain, _pids = _run(session, spec)
    record, pids = _run(session, spec, programs.xgboost_rank1_killed_at_round_7)

    assert record.status is JobStatus.COMPLETED, record.failure_reason
    attempts = session.store.attempts.of(record.id)
    assert [a.number for a in attempts] == [1, 2]
    first, second = attempts
    assert first.status is JobStatus.FAILED and first.retried
    assert first.reason == "worker 1 exited unexpectedly (killed by SIGKILL)"
    assert first.checkpoint_step == 4
    assert second.status is JobStatus.COMPLETED and not second.retried
    assert second.resumed_from_step == 4
    assert second.steps_redone is not None and 0 < second.steps_redone <= 4  # every_steps
    # Resumed at round 4, it grows the very trees of an uninterrupted run, sampled ones too.
    assert record.final_metrics["validation:auc"] == pytest.approx(
        plain.final_metrics["validation:auc"], abs=1e-9
    )
    assert _validation_auc(session, record) == _validation_auc(session, plain)  # bit for bit
    assert [p.step for p in session.store.metrics(record.id, "train:auc")] == list(range(1, 13))
    assert (
        Path(record.artifact or "", "xgboost-model.json").read_bytes()
        == Path(plain.artifact or "", "xgboost-model.json").read_bytes()
    )
    # Billing counts both attempts: the whole wall time, restarts included.
    assert record.billable_seconds == pytest.approx(3 * (record.wall_seconds or 0))
    assert not any(pid_alive(pid) for pid in pids[:3])  # the first group is gone
    # Where each attempt's workers ran: this machine, the first group's pids, then new ones.
    host = socket.gethostname()
    assert first.workers == tuple(f"{host} pid {pid}" for pid in pids[:3])
    assert second.workers == tuple(f"{host} pid {pid}" for pid in pids[3:6])
    kept = CheckpointFolder(Path(record.log_dir or "").parent / "checkpoints").complete()
    assert [c.step for c in kept] == [8, 12]  # keep = 2


def test_a_worker_killed_on_every_attempt_fails_after_max_attempts_retries(
    session: Session,
) -> None:
    spec = _spec(retry={"max_attempts": 2})
    record, _pids = _run(session, spec, programs.xgboost_rank1_killed_every_attempt)
    assert record.status is JobStatus.FAILED
    attempts = session.store.attempts.of(record.id)
    assert len(attempts) == 3  # max_attempts retries after the first
    assert [a.retried for a in attempts] == [True, True, False]
    assert all(a.reason == "worker 1 exited unexpectedly (killed by SIGKILL)" for a in attempts)
    assert record.failure_reason == attempts[-1].reason


def test_an_exception_in_the_program_is_not_retried_unless_asked(session: Session) -> None:
    record, _pids = _run(session, _spec(), programs.raise_on_every_attempt)
    assert record.status is JobStatus.FAILED
    assert len(session.store.attempts.of(record.id)) == 1

    spec = _spec(retry={"max_attempts": 1, "retry_on_program_error": True})
    record, _pids = _run(session, spec, programs.raise_on_every_attempt)
    reasons = [a.reason for a in session.store.attempts.of(record.id)]
    assert reasons == [
        "worker 0 failed: ValueError: bad input, attempt 1",
        "worker 0 failed: ValueError: bad input, attempt 2",
    ]


@pytest.mark.serial(timing=True)  # a 3-s heartbeat timeout, and a bound on how soon it fires
def test_a_stopped_worker_is_detected_by_its_silence_and_retried(session: Session) -> None:
    spec = _spec(retry={"heartbeat_timeout_seconds": 3})
    record, pids = _run(session, spec, programs.xgboost_rank2_stopped_at_round_5)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first = session.store.attempts.of(record.id)[0]
    assert first.reason is not None and first.reason.startswith("worker 2 sent nothing for 3 s")
    assert first.end_time is not None
    # Detected within the timeout (plus a poll), not after a collective's own minutes.
    assert first.end_time - first.start_time < 15
    assert not pid_alive(pids[2])  # the stopped process was killed, not left behind


@pytest.mark.serial(timing=True)  # a 3-s collective timeout, and a bound on how soon it fires
def test_a_worker_that_hangs_alive_is_caught_by_its_peers_collective_timeout(
    session: Session,
) -> None:
    # Its heartbeats go on (30 s would not fire anyway): the peers' all-reduce gives up.
    spec = _spec(retry={"collective_timeout_seconds": 3})
    record, pids = _run(session, spec, programs.xgboost_rank1_hangs_at_round_5)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first, second = session.store.attempts.of(record.id)
    assert first.retried and second.resumed_from_step == 4
    assert first.reason is not None
    assert first.reason.startswith("worker 0's collective timed out waiting on a peer") or (
        first.reason.startswith("worker 2's collective timed out waiting on a peer")
    ), first.reason
    assert "Poll timeout:3 seconds" in first.reason
    assert first.end_time is not None and first.end_time - first.start_time < 20
    assert not pid_alive(pids[1])  # the hung process was killed, not left behind


def test_retries_off_without_checkpoints_start_afresh(session: Session) -> None:
    spec = _spec(checkpoint={"enabled": False}, retry={"max_attempts": 1})
    record, _pids = _run(session, spec, programs.xgboost_rank1_killed_at_round_7)
    assert record.status is JobStatus.COMPLETED
    second = session.store.attempts.of(record.id)[1]
    assert second.resumed_from_step is None and second.steps_redone == 7  # reported before the kill
    assert not (Path(record.log_dir or "").parent / "checkpoints").exists()
    assert [p.step for p in session.store.metrics(record.id, "train:auc")] == list(range(1, 13))


def test_a_worker_dying_while_the_job_stops_ends_it_as_the_stop_asked(session: Session) -> None:
    job = session.controller.prepare(_spec())
    job = dataclasses.replace(
        job, algorithm=ProgramOverride(job.algorithm, programs.report_until_stopped_then_rank1_dies)
    )
    stopper = Stopper()
    stopper.request(JobStatus.STOPPED, "bracket 0: below the rung's top 1/3")
    record = session.controller.run(job, stopper)
    assert record.status is JobStatus.STOPPED  # not Failed, and not retried: it was ending
    assert record.failure_reason == (
        "bracket 0: below the rung's top 1/3; then worker 1 exited unexpectedly (killed by SIGKILL)"
    )
    assert record.artifact is None  # the group did not end cleanly: no model
    assert len(session.store.attempts.of(record.id)) == 1
