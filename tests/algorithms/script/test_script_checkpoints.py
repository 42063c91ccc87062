"""Users' scripts keep their own checkpoints: `$SCALETUNE_CHECKPOINT_DIR` restored on every
rank of a retried attempt, saved by rank 0's `scaletune.checkpoint(step)`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from scaletune.api import Session
from scaletune.spec import TrainingJobSpec, load_training_spec
from scaletune.store import JobStatus, NoticeRecord, TrainingJobRecord
from scaletune.worker import Report, WorkerProgram
from tests.cluster import programs
from tests.jobs import run_job

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _run(
    session: Session, spec: TrainingJobSpec, program: WorkerProgram | None = None
) -> TrainingJobRecord:
    return run_job(session, spec, program)


def _curve(session: Session, record: TrainingJobRecord, name: str) -> list[tuple[int, float]]:
    return [(p.step, p.value) for p in session.store.metrics(record.id, name)]


@pytest.mark.parametrize(
    ("example", "overrides", "metric"),
    [
        ("script-ddp.toml", ["hyperparameters.epochs=5"], "validation:accuracy"),
        (
            "script-xgboost.toml",
            ["hyperparameters.num_round=40", "instance_count=2"],
            "validation:auc",
        ),
    ],
    ids=["pytorch-ddp", "xgboost"],
)
def test_a_script_example_resumes_from_its_own_checkpoint(
    session: Session, example: str, overrides: list[str], metric: str
) -> None:
    spec = load_training_spec(EXAMPLES / example, overrides)
    plain = _run(session, spec)
    record = _run(session, spec, programs.script_rank1_killed_after_two_checkpoints)

    assert record.status is JobStatus.COMPLETED, record.failure_reason
    attempts = session.store.attempts.of(record.id)
    assert len(attempts) == 2, [(attempt.status, attempt.reason) for attempt in attempts]
    first, second = attempts
    assert first.reason == "worker 1 exited unexpectedly (killed by SIGKILL)"
    assert first.checkpoint_step is not None and first.checkpoint_step >= 2
    assert second.resumed_from_step is not None and second.resumed_from_step >= 2
    curve, expected = _curve(session, record, metric), _curve(session, plain, metric)
    assert [step for step, _ in curve] == [step for step, _ in expected]  # each step once
    assert [value for _, value in curve] == pytest.approx([v for _, v in expected], abs=1e-6)


def test_a_notice_ends_a_ddp_script_at_its_epochs_checkpoint_and_nothing_is_redone(
    session: Session,
) -> None:
    """The worker tells the script the job goes on (`scaletune.stop_goes_on`) and SIGTERMs
    it; the example's ranks agree at the epoch's end, after its checkpoint, and leave."""
    # Epochs enough that the notice lands before the last (an epoch of digits takes 20 to
    # 100 ms): it goes from the report of epoch 1 to the controller's next notice check
    # (0.5 s), then to the scripts' next epoch end.
    spec = load_training_spec(
        EXAMPLES / "script-ddp.toml", ["hyperparameters.epochs=20", "retry.max_attempts=0"]
    )
    plain = _run(session, spec)
    job = session.controller.prepare(spec)

    def notice_at_epoch_1(event: Report) -> None:  # as `jobs notice ID --worker 1` gives it
        if event.step == 1 and not session.store.notices.of(job.id):
            notice = NoticeRecord(1, 1, 30.0, "jobs notice", time.time())
            session.store.notices.give(job.id, notice)

    record = session.controller.run(job, on_report=notice_at_epoch_1)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    attempts = session.store.attempts.of(record.id)
    assert len(attempts) == 2, [(attempt.status, attempt.reason) for attempt in attempts]
    first, second = attempts
    assert first.status is JobStatus.STOPPED
    assert (first.reason or "").startswith("worker 1 got a preemption notice (jobs notice, 30 s)")
    assert second.resumed_from_step is not None and second.steps_redone == 0
    metric = "validation:accuracy"
    curve, expected = _curve(session, record, metric), _curve(session, plain, metric)
    assert [step for step, _ in curve] == list(range(1, 21))  # each epoch once
    assert [value for _, value in curve] == pytest.approx([v for _, v in expected], abs=1e-6)
