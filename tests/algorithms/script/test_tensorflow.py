"""TensorFlow scripts under scaletune's TF_CONFIG, for real: MultiWorkerMirroredStrategy on 2
workers, ParameterServerStrategy with a chief, 2 workers and a parameter server, a killed
server, and Hyperband stopping TensorFlow trials. scikit-learn's digits: nothing downloads."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from scaletune.analysis import summarize
from scaletune.api import Session
from scaletune.cluster import Group
from scaletune.spec import load_training_spec, load_tuning_spec
from scaletune.store import JobStatus, TrainingJobRecord
from scaletune.tuning import TuningController
from tests.conftest import require_tensorflow, wait_until
from tests.jobs import digits_job

require_tensorflow("TensorFlow scripts need scaletune[tensorflow] and tf-keras (Keras 2)")

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FLOOR = 0.85  # digits' validation accuracy: chance is 0.1, a worker that learnt nothing ~0.1


def _spec(folder: Path, example: str, *overrides: str) -> Any:
    job = digits_job(example, folder)
    return load_training_spec(job, ["hyperparameters.momentum=0.9", *overrides])


def _run(session: Session, spec: Any, on_started: Any = None) -> TrainingJobRecord:
    return session.controller.run(session.controller.prepare(spec), on_started=on_started)


def _logs(record: TrainingJobRecord) -> list[str]:
    folder = Path(record.log_dir or "")
    return [path.read_text() for path in sorted(folder.glob("worker-*.log"))]


def _tf_config(log: str) -> dict[str, Any]:
    found = re.search(r"TF_CONFIG task (\{.*?\}) in (\{.*\})", log)
    assert found, log[-2000:]
    return {"task": json.loads(found[1]), "cluster": json.loads(found[2])}


def test_a_mirrored_strategy_job_on_two_workers(session: Session, tmp_path: Path) -> None:
    record = _run(session, _spec(tmp_path, "tf-mirrored-mnist.toml", "hyperparameters.epochs=4"))
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert record.final_metrics["validation:accuracy"] > FLOOR
    steps = [p.step for p in session.store.metrics(record.id, "validation:accuracy")]
    assert steps == list(range(1, 5))  # one report an epoch, from rank 0's callback
    logs = _logs(record)
    configs = [_tf_config(log) for log in logs]
    assert [c["task"] for c in configs] == [
        {"type": "worker", "index": 0},
        {"type": "worker", "index": 1},
    ]
    assert all(c["cluster"] == configs[0]["cluster"] for c in configs)
    assert list(configs[0]["cluster"]) == ["worker"] and len(configs[0]["cluster"]["worker"]) == 2
    # Gradients all-reduced: both workers end with the very same weights.
    digests = {re.search(r"weights sha256 (\w+)", log)[1] for log in logs}  # type: ignore[index]
    assert len(digests) == 1
    assert (Path(record.artifact or "") / "model.weights.h5").is_file()  # rank 0's, published
    (attempt,) = session.store.attempts.of(record.id)
    assert attempt.checkpoint_step == 4  # the callback's weights, each epoch
    assert record.billable_seconds == pytest.approx(2 * (record.wall_seconds or 0))


def test_a_parameter_server_job_runs_a_chief_two_workers_and_a_server(
    session: Session, tmp_path: Path
) -> None:
    record = _run(
        session, _spec(tmp_path, "tf-parameter-server-mnist.toml", "hyperparameters.epochs=4")
    )
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert record.final_metrics["validation:accuracy"] > FLOOR
    configs = [_tf_config(log) for log in _logs(record)]
    assert [c["task"] for c in configs] == [
        {"type": "chief", "index": 0},
        {"type": "worker", "index": 0},
        {"type": "worker", "index": 1},
        {"type": "ps", "index": 0},
    ]
    cluster = configs[0]["cluster"]
    assert {role: len(addresses) for role, addresses in cluster.items()} == {
        "chief": 1,
        "worker": 2,
        "ps": 1,
    }
    assert all(c["cluster"] == cluster for c in configs)  # one cluster, as every task sees it
    logs = _logs(record)
    assert "serving as worker 1" in logs[2] and "serving as ps 0" in logs[3]
    assert (Path(record.artifact or "") / "model.weights.h5").is_file()  # the chief's
    assert record.instance_count == 2
    # Four processes held a worker's place for the whole job: each is billed.
    assert record.billable_seconds == pytest.approx(4 * (record.wall_seconds or 0))


@pytest.mark.serial  # a TensorFlow fault test: three TensorFlow processes, one killed
def test_a_killed_parameter_server_fails_the_job_naming_it(
    session: Session, tmp_path: Path
) -> None:
    spec = _spec(
        tmp_path,
        "tf-parameter-server-mnist.toml",
        "hyperparameters.epochs=400",
        "retry.max_attempts=0",  # the first death fails the job: no attempt to wait through
        "instance_count=1",  # a chief, a worker and the server: the fewest processes
    )
    killed: list[int] = []

    def kill_the_server_once_training(group: Group) -> None:
        server = psutil.Process(group.pids[2])  # rank 2: ps 0

        def kill() -> None:
            jobs = session.store.list_training_jobs()
            wait_until(lambda: bool(session.store.metrics(jobs[0].id)), timeout=120)
            (script,) = server.children()  # the script the worker started: the TF server
            script.kill()
            killed.append(script.pid)

        threading.Thread(target=kill, daemon=True).start()

    record = _run(session, spec, on_started=kill_the_server_once_training)
    assert killed
    assert record.status is JobStatus.FAILED
    assert record.failure_reason == (
        "ps 0 (rank 2) failed: ScriptError: tf_mnist.py was killed by SIGKILL"
    )
    assert not psutil.pid_exists(killed[0]) or psutil.Process(killed[0]).status() == "zombie"


@pytest.mark.parametrize("kind", ["mirrored", "parameter-server"])
def test_hyperband_stops_tensorflow_trials_on_the_scripts_metric(
    session: Session, tmp_path: Path, kind: str
) -> None:
    spec = load_tuning_spec(
        digits_job(f"tuning-tf-{kind}-mnist.toml", tmp_path),
        [
            # One rung, at epoch 1 of 3: too early for a forecast, and no later rung will
            # have one, so by default it ranks the values there.
            "training.hyperparameters.epochs=3",
            "hyperband.max_resource=3",
            "max_jobs=3",
            # One worker: the parameter-server job is still a chief, a worker and a server,
            # each a TensorFlow process of its own (their start is most of a trial's time).
            "training.instance_count=1",
        ],
    )
    controller = TuningController(session.controller)
    tuning_id = controller.create(spec)
    controller.run(tuning_id, spec)
    summary = summarize(session.store, tuning_id)
    assert summary.record.status is JobStatus.COMPLETED
    assert summary.job_counts["Failed"] == 0
    assert summary.job_counts["Stopped"] >= 1  # by Hyperband, on the callback's reports
    assert summary.record.best_objective is not None


@pytest.mark.serial  # a TensorFlow fault test: a kill timed on checkpoints
def test_a_mirrored_worker_killed_mid_fit_is_retried_from_its_keras_checkpoint(
    session: Session, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, "tf-mirrored-mnist.toml", "hyperparameters.epochs=24")
    killed: list[int] = []

    def kill_rank_1_after_three_checkpoints(group: Group) -> None:
        if killed:
            return  # the retry's group: left alone
        worker = psutil.Process(group.pids[1])

        def checkpointed() -> int:
            job_id = session.store.list_training_jobs()[0].id
            attempts = session.store.attempts.of(job_id)
            return (attempts[-1].checkpoint_step or 0) if attempts else 0

        def kill() -> None:
            # On the checkpoint's record, not the epoch's report: rank 0 reports an epoch before
            # it saves it, and a kill in between finds the epoch before as the latest checkpoint.
            wait_until(lambda: checkpointed() >= 3)
            (script,) = worker.children()
            script.kill()

        killed.append(group.pids[1])
        threading.Thread(target=kill, daemon=True).start()

    record = _run(session, spec, on_started=kill_rank_1_after_three_checkpoints)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first, second = session.store.attempts.of(record.id)
    assert first.retried and first.reason is not None
    assert first.reason == "worker 1 failed: ScriptError: tf_mnist.py was killed by SIGKILL"
    assert first.checkpoint_step is not None and first.checkpoint_step >= 3
    assert second.resumed_from_step == first.checkpoint_step  # restore(model) -> initial_epoch
    steps = [p.step for p in session.store.metrics(record.id, "validation:accuracy")]
    assert steps == list(range(1, 25))  # each epoch once: none lost, none twice
    assert record.final_metrics["validation:accuracy"] > FLOOR
