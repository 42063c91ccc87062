"""The shared backend suite: the same jobs, run for real, on each backend (worker processes
on this machine, and Ray actors in a placement group on a local Ray instance)."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import fsspec
import pytest

from scaletune.api import Session
from scaletune.checkpoints import CheckpointFolder
from scaletune.cluster import Backend
from scaletune.spec import TrainingJobSpec, training_spec_from_dict
from scaletune.store import JobStatus, TrainingJobRecord
from scaletune.training import Stopper
from scaletune.worker import WorkerProgram
from tests.algorithms.script.test_script import _script_job
from tests.cluster import programs
from tests.conftest import wait_until
from tests.training.test_controller import _ProgramOverride
from tests.training.test_controller import _spec as xgboost_spec

BACKENDS = ["local", "ray"]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest, s3_endpoint: str) -> Backend:
    """Module-wide, so that it starts before any test's leak check starts watching; after
    the local S3, so that Ray's workers inherit its address (a local worker adopts the
    controller's environment with each task, whenever its pool started)."""
    return cast(
        Backend,
        request.getfixturevalue("ray_backend" if request.param == "ray" else "warm_backend"),
    )


@pytest.fixture
def backend_session(backend: Backend, store_path: Path) -> Iterator[Session]:
    with Session(store_path, backend=backend) as opened:
        yield opened


def _on(session: Session, spec: TrainingJobSpec) -> TrainingJobSpec:
    """The spec, asking for the session's backend."""
    cluster = spec.cluster.model_copy(update={"backend": session.controller.backend.name})
    return spec.model_copy(update={"cluster": cluster})


def _run(
    session: Session,
    spec: TrainingJobSpec,
    program: WorkerProgram | None = None,
    *,
    tracker: bool = True,
) -> TrainingJobRecord:
    job = session.controller.prepare(_on(session, spec))
    if program is not None:
        job = dataclasses.replace(job, algorithm=_ProgramOverride(program, tracker=tracker))
    return session.controller.run(job)


def _dnn(strategy: str, **distribution: Any) -> TrainingJobSpec:
    channel = {"dataset": "digits"}
    return training_spec_from_dict(
        {
            "algorithm": "dnn",
            "instance_count": 2,
            "hyperparameters": {"epochs": 2, "hidden_units": 16},
            "distribution": {"strategy": strategy, **distribution},
            "channels": {"train": channel, "validation": channel},
        }
    )


def test_a_three_worker_xgboost_job_completes_with_metrics_model_and_billing(
    backend_session: Session,
) -> None:
    record = _run(backend_session, xgboost_spec())
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    steps = [p.step for p in backend_session.store.metrics(record.id, "validation:auc")]
    assert steps == [1, 2, 3, 4, 5]
    assert record.final_metrics["validation:auc"] > 0.95
    assert (Path(record.artifact or "") / "xgboost-model.json").exists()
    assert record.billable_seconds == pytest.approx(3 * (record.wall_seconds or 0))


def test_a_two_worker_lightgbm_job_meets_on_its_own_network(backend_session: Session) -> None:
    channel = {"dataset": "breast-cancer"}
    spec = training_spec_from_dict(
        {
            "algorithm": "lightgbm",
            "instance_count": 2,
            "hyperparameters": {"num_boost_round": 5, "num_leaves": 7, "metric": ["auc"]},
            "channels": {"train": channel, "validation": channel},
        }
    )
    record = _run(backend_session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    steps = [p.step for p in backend_session.store.metrics(record.id, "validation:auc")]
    assert steps == [1, 2, 3, 4, 5]
    assert record.final_metrics["validation:auc"] > 0.95
    model = (Path(record.artifact or "") / "lightgbm-model.txt").read_text()
    assert "[tree_learner: data]" in model and "[num_machines: 2]" in model  # one network


@pytest.mark.parametrize(
    ("strategy", "distribution"),
    [
        ("allreduce", {}),
        ("allreduce", {"backup_workers": 1}),  # rounds on the job's store, a thread per rank
        ("parameter_server", {}),
        ("parameter_server", {"mode": "async"}),
    ],
)
def test_two_worker_dnn_jobs_in_every_mode(
    backend_session: Session, strategy: str, distribution: dict[str, Any]
) -> None:
    record = _run(backend_session, _dnn(strategy, **distribution))
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    accuracy = backend_session.store.metrics(record.id, "validation:accuracy")
    assert [point.step for point in accuracy] == [1, 2]
    assert accuracy[-1].value > 0.1  # better than chance over 10 digits after 2 short epochs


def test_a_failing_worker_fails_the_job_with_its_error(backend_session: Session) -> None:
    record = _run(backend_session, xgboost_spec(), programs.raise_on_rank_one)
    assert record.status is JobStatus.FAILED
    assert record.failure_reason == "worker 1 failed: ValueError: bad shard on rank 1"


def test_a_stop_reaches_every_worker_which_end_cleanly_and_stay_warm(
    backend_session: Session,
) -> None:
    controller = backend_session.controller
    job = controller.prepare(_on(backend_session, xgboost_spec()))
    job = dataclasses.replace(job, algorithm=_ProgramOverride(programs.report_until_stopped))
    groups: list[Any] = []
    result: list[TrainingJobRecord] = []
    thread = threading.Thread(
        target=lambda: result.append(controller.run(job, on_started=groups.append))
    )
    thread.start()
    wait_until(lambda: len(backend_session.store.metrics(job.id)) >= 3)
    backend_session.store.request_stop(job.id)
    thread.join(60)
    record = result[0]
    assert (record.status, record.failure_reason) == (JobStatus.STOPPED, "stop requested")
    assert groups[0].all_finished  # every worker ended its task when asked: none was killed
    assert (Path(record.artifact or "") / "stopped-at.txt").exists()


def test_a_program_that_ignores_the_stop_is_ended(backend_session: Session) -> None:
    controller = backend_session.controller
    job = controller.prepare(_on(backend_session, xgboost_spec()))
    job = dataclasses.replace(job, algorithm=_ProgramOverride(programs.block_until_killed))
    groups: list[Any] = []
    result: list[TrainingJobRecord] = []
    stopper = Stopper()
    thread = threading.Thread(
        target=lambda: result.append(controller.run(job, stopper, on_started=groups.append))
    )
    thread.start()
    wait_until(lambda: bool(groups))
    stopper.request(JobStatus.STOPPED, "asked", grace_seconds=0.5)  # then it is killed
    thread.join(60)
    assert (result[0].status, result[0].failure_reason) == (JobStatus.STOPPED, "asked")


def test_sigterm_to_a_worker_is_a_notice_and_the_job_goes_on_from_its_next_step(
    backend_session: Session,
) -> None:
    spec = xgboost_spec(
        instance_count=2,
        checkpoint={"every_steps": 4, "every_seconds": None},
        retry={"max_attempts": 0},  # a notice needs no retry
    )
    program = programs.count_steps_sigterm_to_rank1_at_step_5
    record = _run(backend_session, spec, program, tracker=False)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first, second = backend_session.store.attempts.of(record.id)
    assert first.reason == (
        "worker 1 got a preemption notice (SIGTERM, 30 s): goes on at 2 workers from a checkpoint"
    )
    assert second.steps_redone == 0
    steps = [p.step for p in backend_session.store.metrics(record.id, "validation:logloss")]
    assert steps == list(range(1, programs.COUNTED_STEPS + 1))


def test_what_workers_print_reaches_the_jobs_log(backend_session: Session) -> None:
    record = _run(backend_session, xgboost_spec(), programs.report_three_steps, tracker=False)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    for rank in range(3):
        log = (Path(record.log_dir or "") / f"worker-{rank}.log").read_text()
        assert f"scaletune: job {record.id}, rank {rank} of 3, on " in log
        assert f"hello from rank {rank} of 3\n" in log
        assert "native stderr line\n" in log


def test_data_and_model_pass_through_object_storage(
    backend_session: Session, s3_bucket: str, tmp_path: Path
) -> None:
    rows = "\n".join(f"{i % 2},{i % 2 + 0.1 * (i % 7)},{i % 5}" for i in range(60))
    with fsspec.open(f"{s3_bucket}/data/train.csv", "w") as handle:
        handle.write(rows + "\n")
    spec = xgboost_spec(
        channels={"train": {"path": f"{s3_bucket}/data/train.csv"}},
        hyperparameters={"num_round": 3},
        cluster={"staging": f"{s3_bucket}/staging"},
    )
    record = _run(backend_session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert (Path(record.artifact or "") / "xgboost-model.json").exists()
    assert fsspec.filesystem("s3").find(f"{s3_bucket}/staging") == []  # nothing left behind


def test_a_killed_worker_is_retried_from_its_checkpoint_in_object_storage(
    backend_session: Session, s3_bucket: str
) -> None:
    spec = xgboost_spec(
        hyperparameters={"num_round": 12, "max_depth": 3, "eval_metric": "auc"},
        checkpoint={"every_steps": 4, "every_seconds": None},
        cluster={"staging": f"{s3_bucket}/staging"},
    )
    plain = _run(backend_session, spec)
    record = _run(backend_session, spec, programs.xgboost_rank1_killed_at_round_7)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first, second = backend_session.store.attempts.of(record.id)
    assert (first.reason or "").startswith("worker 1 exited unexpectedly")
    assert (first.checkpoint_step, second.resumed_from_step) == (4, 4)
    assert record.final_metrics == plain.final_metrics  # the same trees, rounds 5 to 12 too
    saved = CheckpointFolder(f"{s3_bucket}/staging/checkpoints/{record.id}").complete()
    assert [checkpoint.step for checkpoint in saved] == [8, 12]


def test_data_and_model_pass_through_a_shared_folder(
    backend_session: Session, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    record = _run(backend_session, xgboost_spec(cluster={"staging": str(shared)}))
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert (Path(record.artifact or "") / "xgboost-model.json").exists()
    assert list(shared.iterdir()) == []


def test_each_rank_of_a_script_gets_its_own_tf_config_address(
    backend_session: Session, tmp_path: Path
) -> None:
    spec = _script_job(
        tmp_path,
        "import os\n"
        "from pathlib import Path\n"
        "Path(os.environ['SCALETUNE_MODEL_DIR'], 'tf.json').write_text(os.environ['TF_CONFIG'])\n",
    )
    record = _run(backend_session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    workers = json.loads((Path(record.artifact or "") / "tf.json").read_text())["cluster"]
    assert len(set(workers["worker"])) == 2
    assert all(address.rsplit(":", 1)[1].isdigit() for address in workers["worker"])
