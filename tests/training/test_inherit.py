"""A job that begins from another job's checkpoint (`checkpoint.start_from`), with real
2-worker XGBoost jobs: the same settings go on exactly as the other job went; other settings
go on from its trees; a bad start is refused before anything is written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from scaletune.api import Session
from scaletune.checkpoints import CheckpointFolder
from scaletune.errors import CheckpointNotReadyError, InvalidInputError
from scaletune.spec import TrainingJobSpec, training_spec_from_dict
from scaletune.store import JobStatus, TrainingJobRecord
from tests.jobs import run_job

HYPERPARAMETERS = {"num_round": 12, "max_depth": 3, "eta": 0.3, "eval_metric": "auc"}


def _spec(start_from: dict[str, Any] | None = None, **hyperparameters: Any) -> TrainingJobSpec:
    channel = {"dataset": "breast-cancer"}
    checkpoint: dict[str, Any] = {"every_steps": 4, "every_seconds": None, "keep": 3}
    if start_from is not None:
        checkpoint["start_from"] = start_from
    return training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "instance_count": 2,
            "hyperparameters": {**HYPERPARAMETERS, **hyperparameters},
            "channels": {"train": channel, "validation": channel},
            "checkpoint": checkpoint,
        }
    )


def _curve(session: Session, record: TrainingJobRecord) -> list[tuple[int, float]]:
    return [(p.step, p.value) for p in session.store.metrics(record.id, "validation:auc")]


def test_the_same_settings_from_a_checkpoint_go_on_as_the_first_job_did(
    session: Session,
) -> None:
    first = run_job(session, _spec())
    assert first.status is JobStatus.COMPLETED, first.failure_reason
    second = run_job(session, _spec({"job": first.id, "step": 8}))

    assert second.status is JobStatus.COMPLETED, second.failure_reason
    (attempt,) = session.store.attempts.of(second.id)
    assert attempt.resumed_from_step == 8
    assert _curve(session, second) == _curve(session, first)  # steps 1-8 copied, 9-12 its own
    assert (
        Path(second.artifact or "", "xgboost-model.json").read_bytes()
        == Path(first.artifact or "", "xgboost-model.json").read_bytes()
    )
    assert second.spec["checkpoint"]["start_from"] == {"job": first.id, "step": 8}
    # Its folder holds the copy (marked as another job's) and its own newest checkpoint.
    folder = CheckpointFolder(_checkpoints(session, second))
    assert [c.step for c in folder.complete()] == [8, 12]  # the copy, and its own (keep 3)
    assert folder.at(8).meta["inherited_from"] == first.id


def test_other_settings_grow_on_from_the_checkpoints_trees(session: Session) -> None:
    first = run_job(session, _spec())
    second = run_job(session, _spec({"job": first.id}, eta=0.05, max_depth=2))

    assert second.status is JobStatus.COMPLETED, second.failure_reason
    assert session.store.attempts.of(second.id)[0].resumed_from_step == 12  # the newest
    assert _curve(session, second) == _curve(session, first)  # nothing left to grow
    third = run_job(session, _spec({"job": first.id, "step": 4}, eta=0.05, max_depth=2))
    ours, theirs = _curve(session, third), _curve(session, first)
    assert ours[:4] == theirs[:4]
    assert [step for step, _ in ours] == list(range(1, 13))
    assert ours[4:] != theirs[4:]  # its own eta and depth from round 5 on


@pytest.mark.parametrize(
    ("start_from", "expected"),
    [
        ({"job": "nobody"}, "checkpoint.start_from.job: there is no job 'nobody'"),
        ({"job": "FIRST", "step": 5}, "checkpoint.start_from: no complete checkpoint at step 5"),
    ],
)
def test_a_bad_start_is_refused_and_nothing_is_written(
    session: Session, start_from: dict[str, Any], expected: str
) -> None:
    first = run_job(session, _spec())
    start_from = {**start_from, "job": start_from["job"].replace("FIRST", first.id)}
    before = [job.id for job in session.store.list_training_jobs()]
    with pytest.raises(InvalidInputError) as caught:
        session.controller.prepare(_spec(start_from))
    assert expected in str(caught.value) and "\n" not in str(caught.value)
    assert [job.id for job in session.store.list_training_jobs()] == before


def test_a_job_without_checkpoints_is_no_start(session: Session) -> None:
    plain = training_spec_from_dict(
        {**_spec().model_dump(mode="json", exclude_none=True), "checkpoint": {"enabled": False}}
    )
    first = run_job(session, plain)
    with pytest.raises(InvalidInputError, match=f"job {first.id!r} keeps no checkpoints"):
        session.controller.prepare(_spec({"job": first.id}))


def _checkpoints(session: Session, record: TrainingJobRecord) -> Path:
    return session.controller.jobs_dir / record.id / "checkpoints"


def test_a_dnn_checkpoint_goes_on_only_on_as_many_workers(session: Session) -> None:
    """Its checkpoint holds each worker's place in its shard: another size is refused."""
    channel = {"dataset": "digits"}
    raw: dict[str, Any] = {
        "algorithm": "dnn",
        "instance_count": 1,
        "hyperparameters": {"model": "mlp", "hidden_units": 16, "epochs": 1},
        "channels": {"train": channel, "validation": channel},
        "checkpoint": {"every_steps": 10, "every_seconds": None},
    }
    first = run_job(session, training_spec_from_dict(raw))
    assert first.status is JobStatus.COMPLETED, first.failure_reason
    wider = {**raw, "instance_count": 2, "checkpoint": {"start_from": {"job": first.id}}}
    with pytest.raises(InvalidInputError, match="holds the state of each of its 1 workers"):
        session.controller.prepare(training_spec_from_dict(wider))
    same = {**raw, "checkpoint": {"start_from": {"job": first.id}}}
    second = run_job(session, training_spec_from_dict(same))
    assert second.status is JobStatus.COMPLETED, second.failure_reason
    assert session.store.attempts.of(second.id)[0].resumed_from_step is not None


def test_a_checkpoint_whose_reports_are_not_stored_yet_is_passed_over(session: Session) -> None:
    """A worker's checkpoint is on disk before its controller has stored the reports that
    came just before it: a copy taken then would have a gap in its curve."""
    first = run_job(session, _spec())
    folder = CheckpointFolder(_checkpoints(session, first))
    newest = folder.at(12)
    # As if the workers had gone on to round 16 and the controller had not heard yet.
    folder.save(16, folder.load(newest), {**newest.meta, "reported_step": 16})
    assert session.controller.has_checkpoint(first.id)  # round 12's is whole and stored
    second = run_job(session, _spec({"job": first.id}))
    assert session.store.attempts.of(second.id)[0].resumed_from_step == 12
    assert [step for step, _ in _curve(session, second)] == list(range(1, 13))
    with pytest.raises(InvalidInputError, match=r"step: .* up to its checkpoint at step 16 are"):
        session.controller.prepare(_spec({"job": first.id, "step": 16}))


@pytest.mark.parametrize("running", [True, False], ids=["running", "ended"])
def test_a_newest_checkpoint_pruned_while_it_is_read_is_not_ready_while_its_job_runs(
    session: Session, monkeypatch: pytest.MonkeyPatch, running: bool
) -> None:
    """A running job prunes its older checkpoints as it saves: between finding its newest
    and reading it, a copy can see it go (a PBT donor going on). Asked again, the copy finds
    the newer one. An ended job prunes nothing: a checkpoint gone then is an error."""
    first = run_job(session, _spec())
    if running:
        session.store.mark_in_progress(first.id, 0.0, os.getpid(), "here")
    load = CheckpointFolder.load

    def pruned_once_found(self: CheckpointFolder, checkpoint: Any) -> dict[str, bytes]:
        files = load(self, checkpoint)  # found whole (resume_point reads it)...
        monkeypatch.setattr(CheckpointFolder, "load", pruned)
        return files

    def pruned(self: CheckpointFolder, checkpoint: Any) -> dict[str, bytes]:
        shutil.rmtree(checkpoint.location)  # ...then pruned by the job going on
        return load(self, checkpoint)

    monkeypatch.setattr(CheckpointFolder, "load", pruned_once_found)
    expected = CheckpointNotReadyError if running else InvalidInputError
    with pytest.raises(expected, match="cannot be read") as raised:
        session.controller.prepare(_spec({"job": first.id}))
    assert isinstance(raised.value, CheckpointNotReadyError) is running


def test_a_copy_resumed_before_it_ever_started_goes_on_from_its_inherited_checkpoint(
    session: Session,
) -> None:
    """A copy (PBT's) is created, its inherited reports stored and the checkpoint copied,
    before it starts: a tuning controller killed in between leaves it with no attempt. Resumed,
    it goes on from the inherited checkpoint, and reports each step once."""
    first = run_job(session, _spec())
    copy = session.controller.prepare(_spec({"job": first.id, "step": 8}))
    session.store.abandon_training_job(copy.id, JobStatus.FAILED, "its controller ended", 0.0)

    record = session.controller.run(session.controller.prepare_resume(copy.id))

    assert record.status is JobStatus.COMPLETED, record.failure_reason
    (attempt,) = session.store.attempts.of(copy.id)
    assert attempt.resumed_from_step == 8
    assert _curve(session, record) == _curve(session, first)  # steps 1-8 once, then its own
