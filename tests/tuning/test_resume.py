"""Kill a tuning controller with SIGKILL mid-job, resume it: nothing lost, nothing run twice."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from scaletune.analysis import summarize
from scaletune.api import Session
from scaletune.errors import InvalidInputError
from scaletune.store import JobStatus
from scaletune.tuning import TuningController
from tests.conftest import pid_alive, wait_until

TUNING = """
objective_metric = "validation:logloss"
objective_type = "Minimize"
strategy = "Hyperband"
max_jobs = 6
max_parallel_jobs = 2
seed = 3

[hyperband]
min_resource = 100
max_resource = 400
eta = 2

[ranges]
eta = { type = "Continuous", min_value = 0.05, max_value = 0.5 }

[training]
algorithm = "xgboost"
instance_count = 2
hyperparameters = { num_round = 400, max_depth = 3, eval_metric = "logloss" }
channels.train = { dataset = "breast-cancer" }
channels.validation = { dataset = "breast-cancer" }
checkpoint = { every_steps = 40 }
"""


def _ended_trials(store: Path) -> list[tuple[str, float]]:
    if not store.exists():
        return []
    with sqlite3.connect(store) as db:
        try:
            return db.execute(
                "select id, end_time from training_jobs where tuning_job_id is not null "
                "and status in ('Completed', 'Failed', 'Stopped') order by id"
            ).fetchall()
        except sqlite3.OperationalError:
            return []


FIRST_RUNG = 100  # min_resource


def _running_with_checkpoints(store: Path, reported_below: int | None = None) -> int:
    """Running trials with a checkpoint; with `reported_below`, only those whose stored
    reports are short of that step. (On resume, one whose stored reports had reached a rung
    might rightly be stopped there by the replayed verdict instead of going on.)"""
    query = (
        "select count(*) from job_attempts a where a.status = 'InProgress' "
        "and a.checkpoint_step is not null"
    )
    parameters: tuple[int, ...] = ()
    if reported_below is not None:
        query += (
            " and (select coalesce(max(step), 0) from metric_points m where m.job_id = a.job_id)"
            " < ?"
        )
        parameters = (reported_below,)
    with sqlite3.connect(store) as db:
        try:
            return int(db.execute(query, parameters).fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def _kill_9_when(file: Path, ready: Callable[[], bool]) -> int:
    """Run `scaletune tune FILE` in a process of its own, SIGKILL it once `ready()`, and wait
    until its workers are gone too; the controller's pid."""
    controller = subprocess.Popen(
        [sys.executable, "-m", "scaletune", "tune", str(file), "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    parent = psutil.Process(controller.pid)
    try:
        wait_until(ready, timeout=120)
        workers = [child.pid for child in parent.children(recursive=True)]
        os.kill(controller.pid, signal.SIGKILL)
    finally:
        controller.kill()
        controller.wait()
    wait_until(lambda: not any(pid_alive(pid) for pid in workers), timeout=10)
    return controller.pid


def test_resume_after_kill_9(session: Session, store_path: Path, tmp_path: Path) -> None:
    file = tmp_path / "tuning.toml"
    file.write_text(TUNING)
    controller_pid = _kill_9_when(
        file,
        lambda: (
            len(_ended_trials(store_path)) >= 2
            and _running_with_checkpoints(store_path, reported_below=FIRST_RUNG) >= 1
        ),
    )
    before = dict(_ended_trials(store_path))
    tuning_id = session.store.list_tuning_jobs()[0].id
    assert session.store.get_tuning_job(tuning_id).status is JobStatus.IN_PROGRESS

    TuningController(session.controller).resume(tuning_id)

    summary = summarize(session.store, tuning_id)
    assert summary.record.status is JobStatus.COMPLETED
    trials = session.store.trials.rows(summary.record.id)
    assert [t.trial_number for t in trials] == list(range(6))  # exactly max_jobs, none twice
    assert all(t.status.is_terminal for t in trials)
    after = {t.id: t.end_time for t in trials}
    assert all(after[job_id] == end for job_id, end in before.items())  # none rerun
    # The trials that were running went on from their checkpoints: same trial, attempt 2.
    interrupted = [t for t in trials if len(session.store.attempts.of(t.id)) > 1]
    assert interrupted and all(t.id not in before for t in interrupted)
    resumed = [session.store.attempts.of(t.id)[1] for t in interrupted]
    assert any(attempt.resumed_from_step for attempt in resumed)
    for attempt in resumed:
        assert attempt.resumed_from_step is None or attempt.resumed_from_step % 40 == 0
    for trial in interrupted:
        first = session.store.attempts.of(trial.id)[0]
        assert (first.status, first.reason) == (
            JobStatus.FAILED,
            f"its tuning controller (process {controller_pid}) ended",
        )
        assert trial.status is not JobStatus.FAILED
    for trial in trials:  # no report twice: each step of the objective once, in order
        steps = [p.step for p in session.store.metrics(trial.id, "validation:logloss")]
        assert steps == sorted(set(steps))
    assert summary.record.best_training_job is not None


def test_resume_refuses_ended_or_running_jobs(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="no tuning job with id 'nope'"):
        TuningController(session.controller).resume("nope")
    from tests.tuning.test_tuner import _spec, _tune

    summary = _tune(session, _spec(max_jobs=1, max_parallel_jobs=1))
    with pytest.raises(InvalidInputError, match="already ended: Completed"):
        TuningController(session.controller).resume(summary.record.id)
    tuner = TuningController(session.controller)
    running = tuner.create(_spec(max_jobs=1, max_parallel_jobs=1))
    session.store.mark_tuning_in_progress(
        running, 1.0, os.getpid(), __import__("socket").gethostname()
    )
    with pytest.raises(InvalidInputError, match="is still running"):
        tuner.resume(running)


def _paused(store: Path) -> list[str]:
    with sqlite3.connect(store) as db:
        try:
            return [
                row[0] for row in db.execute("select id from training_jobs where status = 'Paused'")
            ]
        except sqlite3.OperationalError:
            return []


def test_resume_after_kill_9_keeps_paused_trials_paused(
    session: Session, store_path: Path, tmp_path: Path
) -> None:
    """Promotion-type Hyperband: a trial paused at the kill waits as it was (its checkpoint
    and its place in its rung kept) and is promoted, or ends Stopped, after the resume."""
    file = tmp_path / "tuning.toml"
    file.write_text(
        TUNING.replace("max_jobs = 6", "max_jobs = 8").replace(
            "eta = 2\n", 'eta = 2\ntype = "promotion"\nbrackets = 1\n', 1
        )
    )
    _kill_9_when(
        file, lambda: len(_paused(store_path)) >= 1 and _running_with_checkpoints(store_path) >= 1
    )
    paused_at_kill = _paused(store_path)
    tuning_id = session.store.list_tuning_jobs()[0].id

    TuningController(session.controller).resume(tuning_id)

    summary = summarize(session.store, tuning_id)
    assert summary.record.status is JobStatus.COMPLETED
    trials = session.store.trials.rows(tuning_id)
    assert [t.trial_number for t in trials] == list(range(8))
    assert all(t.status.is_terminal for t in trials)  # none left Paused
    for job_id in paused_at_kill:
        attempts = session.store.attempts.of(job_id)
        assert attempts[0].status is JobStatus.PAUSED  # not taken for an interrupted run
        record = session.store.get_training_job(job_id)
        if len(attempts) == 1:  # never promoted
            assert record.status is JobStatus.STOPPED
            assert (record.failure_reason or "").endswith(
                "not promoted before the tuning job ended"
            )
        else:  # promoted after the resume, from the checkpoint its pause saved
            assert attempts[1].resumed_from_step is not None
    for trial in trials:  # no report twice: each step of the objective once, in order
        steps = [p.step for p in session.store.metrics(trial.id, "validation:logloss")]
        assert steps == sorted(set(steps))


def _copies(store: Path) -> int:
    """PBT trials that started from another's checkpoint."""
    with sqlite3.connect(store) as db:
        try:
            return int(
                db.execute(
                    "select count(*) from training_jobs "
                    "where json_extract(spec, '$.checkpoint.start_from.job') is not null"
                ).fetchone()[0]
            )
        except sqlite3.OperationalError:
            return 0


@pytest.mark.parametrize("synchronous", [False, True], ids=["async", "sync"])
def test_resume_after_kill_9_of_a_pbt_job(
    session: Session, store_path: Path, tmp_path: Path, synchronous: bool
) -> None:
    """Population-based training: the members running at the kill go on from their own
    checkpoints (a copy from its inherited one or a later one); the replayed reports decide
    nothing; copies made after the resume take new numbers. Synchronous, the generations the
    replay passed are not waited on again."""
    file = tmp_path / "tuning.toml"
    pbt = TUNING.replace('strategy = "Hyperband"', 'strategy = "PBT"').replace(
        "[hyperband]\nmin_resource = 100\nmax_resource = 400\neta = 2\n",
        f"[pbt]\nperturbation_interval = 80\nsynchronous = {str(synchronous).lower()}\n",
    )
    file.write_text(pbt.replace("max_jobs = 6", "max_jobs = 8"))
    _kill_9_when(
        file, lambda: _copies(store_path) >= 1 and _running_with_checkpoints(store_path) >= 1
    )
    tuning_id = session.store.list_tuning_jobs()[0].id
    before = {t.id for t in session.store.training_jobs_of(tuning_id)}

    TuningController(session.controller).resume(tuning_id)

    summary = summarize(session.store, tuning_id)
    assert summary.record.status is JobStatus.COMPLETED
    trials = session.store.training_jobs_of(tuning_id)
    numbers = [t.trial_number for t in trials]
    assert numbers == list(range(len(trials))) and len(trials) <= 8
    assert all(t.status.is_terminal and t.status is not JobStatus.FAILED for t in trials)
    resumed = [t for t in trials if len(session.store.attempts.of(t.id)) > 1]
    assert resumed and all(t.id in before for t in resumed)
    steps_resumed = [session.store.attempts.of(t.id)[1].resumed_from_step for t in resumed]
    assert any(step is not None for step in steps_resumed)  # from its own folder's checkpoint
    assert all(step is None or step % 40 == 0 for step in steps_resumed)
    for trial in trials:  # each step of the objective once, in order, copies' included
        steps = [p.step for p in session.store.metrics(trial.id, "validation:logloss")]
        assert steps == list(range(1, len(steps) + 1))
