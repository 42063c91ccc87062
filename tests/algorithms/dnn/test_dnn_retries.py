"""A DNN worker killed mid-epoch: the job resumes from its checkpoint (model, optimiser,
schedule, position in the shuffled order) and ends where an uninterrupted run ends."""

from __future__ import annotations

from typing import Any

import pytest

from scaletune.api import Session
from scaletune.spec import training_spec_from_dict
from scaletune.store import JobStatus, TrainingJobRecord
from scaletune.worker import WorkerProgram
from tests.cluster import programs
from tests.jobs import run_job

DIGITS = {"dataset": "digits"}


def _run(
    session: Session,
    distribution: dict[str, Any],
    program: WorkerProgram | None = None,
    retry: dict[str, Any] | None = None,
    **changes: Any,
) -> TrainingJobRecord:
    spec = training_spec_from_dict(
        {
            "algorithm": "dnn",
            "instance_count": 2,
            "distribution": distribution,
            "hyperparameters": {
                "hidden_units": 32,
                "batch_size": 16,
                "learning_rate": 0.05,
                "momentum": 0.9,
                "epochs": 3,
                "warmup_epochs": 1,
                **changes,
            },
            "channels": {"train": DIGITS, "validation": DIGITS},
            "checkpoint": {"every_steps": 15, "every_seconds": None},
            "retry": retry or {},
        }
    )
    return run_job(session, spec, program)


ADASCALE = {"lr_scaling": "adascale", "lr_schedule": "cosine", "lr_final": 0.1}


@pytest.mark.parametrize(
    ("distribution", "changes"),
    [
        ({"strategy": "allreduce"}, {}),
        ({"strategy": "parameter_server", "mode": "sync"}, {}),
        # The gain's estimates and the progress made are in the checkpoint; estimated every
        # 4th update, so are each rank's norms measured since (checkpoints every 15th).
        ({"strategy": "allreduce"}, {**ADASCALE, "adascale_every_updates": 4}),
        ({"strategy": "parameter_server", "mode": "sync"}, ADASCALE),
    ],
    ids=["allreduce", "parameter-server-sync", "allreduce-adascale", "parameter-server-adascale"],
)
def test_a_killed_dnn_worker_resumes_from_its_checkpoint_and_matches(
    session: Session, distribution: dict[str, Any], changes: dict[str, Any]
) -> None:
    plain = _run(session, distribution, **changes)
    record = _run(session, distribution, programs.dnn_rank1_killed_on_first_attempt, **changes)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first, second = session.store.attempts.of(record.id)
    assert first.reason == "worker 1 exited unexpectedly (killed by SIGKILL)"
    assert second.resumed_from_step is not None and second.resumed_from_step % 15 == 0
    curve = [(p.step, p.value) for p in session.store.metrics(record.id, "validation:accuracy")]
    expected = [(p.step, p.value) for p in session.store.metrics(plain.id, "validation:accuracy")]
    assert [step for step, _ in curve] == [1, 2, 3]  # no epoch reported twice
    # Synchronous modes resume exactly: the same curve, to float noise.
    assert [value for _, value in curve] == pytest.approx([v for _, v in expected], abs=1e-6)
    assert record.final_metrics["train:loss"] == pytest.approx(
        plain.final_metrics["train:loss"], rel=1e-5
    )
    if changes:
        gains = session.store.metrics(record.id, "adascale:gain")
        expected_gains = session.store.metrics(plain.id, "adascale:gain")
        assert [p.value for p in gains] == pytest.approx([p.value for p in expected_gains])


def test_a_killed_worker_of_a_job_with_backup_workers_goes_on_from_its_checkpoint(
    session: Session,
) -> None:
    """Rounds with backup workers resume where the checkpoint left them (not bit for bit:
    which gradients a round takes is a matter of timing)."""
    distribution = {"strategy": "allreduce", "backup_workers": 1}
    record = _run(session, distribution, programs.dnn_rank1_killed_on_first_attempt)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first, second = session.store.attempts.of(record.id)
    assert first.reason == "worker 1 exited unexpectedly (killed by SIGKILL)"
    assert second.resumed_from_step is not None and second.resumed_from_step % 15 == 0
    curve = session.store.metrics(record.id, "validation:accuracy")
    assert [point.step for point in curve] == [1, 2, 3]  # no epoch reported twice
    assert curve[-1].value > 0.8


@pytest.mark.parametrize(
    ("distribution", "timed_out"),
    [
        ({"strategy": "allreduce"}, "Timed out waiting 3000ms"),
        ({"strategy": "parameter_server", "mode": "sync"}, "no reply from the parameter server"),
    ],
    ids=["allreduce", "parameter-server-sync"],
)
def test_a_dnn_worker_that_hangs_alive_is_retried_after_the_collective_timeout(
    session: Session, distribution: dict[str, Any], timed_out: str
) -> None:
    retry = {"collective_timeout_seconds": 3}
    record = _run(session, distribution, programs.dnn_rank1_hangs_on_first_attempt, retry)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first, second = session.store.attempts.of(record.id)
    assert first.retried and first.reason is not None
    assert first.reason.startswith("worker 0's collective timed out waiting on a peer")
    assert timed_out in first.reason
    assert second.resumed_from_step is not None


def test_a_rendezvous_port_taken_before_it_is_bound_is_retried_on_new_ports(
    session: Session,
) -> None:
    distribution = {"strategy": "allreduce"}
    record = _run(session, distribution, programs.dnn_rank0_port_taken_on_first_attempt)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first, second = session.store.attempts.of(record.id)
    assert first.retried and first.reason is not None
    assert first.reason.startswith("worker 0 could not bind a rendezvous port"), first.reason
    assert second.status is JobStatus.COMPLETED
