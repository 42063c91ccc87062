"""SIGTERM to `scaletune train` (a preempted machine) saves a checkpoint and stops the job;
`scaletune jobs resume` continues it to the model an uninterrupted run gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from scaletune.api import Estimator, Session
from tests.cli.test_cli import _cli
from tests.conftest import pid_alive, wait_until

# 600 rounds outlast the stop's lag: a SIGTERM sent once round 20 showed in the store stopped
# the job at round 150-180 beside a CPU hog (the store sees reports up to a second late).
JOB = """\
algorithm = "xgboost"
instance_count = 2
[hyperparameters]
num_round = 600
max_depth = 2
eval_metric = "auc"
subsample = 0.8
colsample_bytree = 0.7
colsample_bylevel = 0.5
[channels.train]
dataset = "breast-cancer"
[channels.validation]
dataset = "breast-cancer"
[checkpoint]
every_steps = 1000
"""


def test_sigterm_checkpoints_and_stops_then_resume_finishes_the_same_model(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Past the first rounds whose samplers were fresh: a stop before round 10 has nothing
    # to keep (it would resume from the start), so it saves no checkpoint.
    process, workers = _train_until(JOB, tmp_path, lambda: _rounds_reported(store_path) >= 20)
    try:
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 1
    stopped = json.loads(out)
    assert stopped["status"] == "Stopped"
    assert stopped["failure_reason"].startswith("SIGTERM: stopped at a checkpoint")
    saved_at = stopped["attempts"][0]["checkpoint_step"]
    # At the stop, not by the count; at the last round whose samplers were fresh (every 10).
    assert saved_at is not None and 0 < saved_at < 600 and saved_at % 10 == 0
    assert not any(pid_alive(pid) for pid in workers)

    code, out, err = _cli(capsys, "jobs", "resume", stopped["id"], "--json")
    resumed = json.loads(out)
    assert code == 0, (resumed["failure_reason"], resumed["attempts"])
    assert resumed["id"] == stopped["id"] and resumed["status"] == "Completed"
    first, second = resumed["attempts"]
    assert (first["status"], second["status"]) == ("Stopped", "Completed")
    assert second["resumed_from_step"] == saved_at
    assert resumed["billable_seconds"] > stopped["billable_seconds"]  # both attempts count

    with Session(store_path) as session:
        steps = [p.step for p in session.store.metrics(resumed["id"], "validation:auc")]
        plain = Estimator(
            "xgboost",
            {
                "num_round": 600,
                "max_depth": 2,
                "eval_metric": "auc",
                "subsample": 0.8,
                "colsample_bytree": 0.7,
                "colsample_bylevel": 0.5,
            },
            instance_count=2,
            session=session,
        ).fit({"train": {"dataset": "breast-cancer"}, "validation": {"dataset": "breast-cancer"}})
        expected = plain.describe().final_metrics["validation:auc"]
    assert steps == list(range(1, 601))  # each round once
    assert resumed["final_metrics"]["validation:auc"] == pytest.approx(expected, abs=1e-9)

    code, _, err = _cli(capsys, "jobs", "resume", stopped["id"])
    assert code == 2
    assert err.strip().endswith("is Completed: only a Stopped, Failed or Paused job resumes")
    code, _, err = _cli(capsys, "jobs", "resume", "no-such-job")
    assert code == 2 and "no training job with id 'no-such-job'" in err


def test_a_job_whose_controller_was_killed_resumes_from_its_checkpoint(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = JOB.replace("every_steps = 1000", "every_steps = 50")
    process, workers = _train_until(job, tmp_path, lambda: _checkpoint_saved(store_path))
    process.kill()  # kill -9: nothing of the controller runs after this
    process.communicate()
    wait_until(lambda: not any(pid_alive(pid) for pid in workers), timeout=10)

    _code, out, _err = _cli(capsys, "jobs", "list", "--json")
    job_id = json.loads(out)[0]["id"]
    code, out, _err = _cli(capsys, "jobs", "resume", job_id, "--json")
    resumed = json.loads(out)
    assert code == 0, (resumed["failure_reason"], resumed["attempts"])
    first, second = resumed["attempts"]
    assert first["status"] == "Failed"
    assert first["reason"] == f"controller process {process.pid} ended without finishing the job"
    assert second["resumed_from_step"] is not None and second["resumed_from_step"] % 50 == 0
    with Session(store_path) as session:
        steps = [p.step for p in session.store.metrics(job_id, "validation:auc")]
    assert steps == list(range(1, 601))


def _train_until(
    job: str, folder: Path, ready: Callable[[], bool]
) -> tuple[subprocess.Popen[str], list[int]]:
    """`scaletune train --json` of this job file in a process of its own, once its two
    workers run and `ready()` holds; the process and its workers' pids."""
    job_file = folder / "long.toml"
    job_file.write_text(job)
    process = subprocess.Popen(
        [sys.executable, "-m", "scaletune", "train", str(job_file), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        parent = psutil.Process(process.pid)
        # two workers and the fork server they were forked from
        wait_until(lambda: len(parent.children(recursive=True)) == 3, timeout=60)
        workers = [child.pid for child in parent.children(recursive=True)]
        wait_until(ready, timeout=60)
    except BaseException:
        process.kill()
        process.communicate()
        raise
    return process, workers


def _rounds_reported(store_path: Path) -> int:
    """The highest round the store holds a metric of (0 before the first)."""
    import sqlite3

    if not store_path.exists():
        return 0
    with sqlite3.connect(store_path) as db:
        try:
            return int(db.execute("select coalesce(max(step), 0) from metric_points").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def _checkpoint_saved(store_path: Path) -> bool:
    import sqlite3

    if not store_path.exists():
        return False
    with sqlite3.connect(store_path) as db:
        try:
            found = db.execute("select max(checkpoint_step) from job_attempts").fetchone()[0]
        except sqlite3.OperationalError:
            return False
    return found is not None
