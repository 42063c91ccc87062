"""Real distributed LightGBM: workers on LightGBM's own network, checkpoints, a stop and a
resume, a worker killed mid-job, and bad input refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import lightgbm as lgb
import pytest

from scaletune.api import Session
from scaletune.errors import InvalidInputError
from scaletune.spec import TrainingJobSpec, training_spec_from_dict
from scaletune.store import JobStatus, TrainingJobRecord
from scaletune.training import Stopper
from scaletune.worker import WorkerProgram
from tests.cluster import programs
from tests.jobs import ProgramOverride

CHANNEL = {"dataset": "breast-cancer"}


def _spec(workers: int, **fields: Any) -> TrainingJobSpec:
    return training_spec_from_dict(
        {
            "algorithm": "lightgbm",
            "instance_count": workers,
            "hyperparameters": {"num_boost_round": 12, "num_leaves": 7, "metric": ["auc"]},
            "channels": {"train": CHANNEL, "validation": CHANNEL},
            **fields,
        }
    )


def _run(
    session: Session,
    spec: TrainingJobSpec,
    program: WorkerProgram | None = None,
    stop: Stopper | None = None,
) -> TrainingJobRecord:
    job = session.controller.prepare(spec)
    if program is not None:
        job = dataclasses.replace(job, algorithm=ProgramOverride(job.algorithm, program))
    return session.controller.run(job, stop=stop)


def _trees(record: TrainingJobRecord) -> str:
    """The model's trees (its text less the parameters, which name each run's ports)."""
    model = (Path(record.artifact or "") / "lightgbm-model.txt").read_text()
    return model.split("end of trees")[0]


def test_two_and_three_workers_grow_the_same_trees_and_report_every_round(
    session: Session,
) -> None:
    records = {workers: _run(session, _spec(workers)) for workers in (1, 2, 3)}
    for workers, record in records.items():
        assert record.status is JobStatus.COMPLETED, record.failure_reason
        steps = [p.step for p in session.store.metrics(record.id, "validation:auc")]
        assert steps == list(range(1, 13)), workers
        assert record.billable_seconds == pytest.approx(workers * (record.wall_seconds or 0))
    # Bins from the whole channel on every rank: the model does not depend on the shards.
    assert _trees(records[2]) == _trees(records[3])
    booster = lgb.Booster(model_file=str(Path(records[3].artifact or "") / "lightgbm-model.txt"))
    assert booster.current_iteration() == 12
    one, three = (records[n].final_metrics["validation:auc"] for n in (1, 3))
    assert one > 0.95 and abs(one - three) < 0.005  # LightGBM's data-parallel learner: close
    # The same names at every size: not the train channel's (each rank's shard would differ).
    assert all(set(r.final_metrics) == {"validation:auc"} for r in records.values())


def test_a_stop_keeps_a_checkpoint_and_the_resume_grows_the_same_trees(session: Session) -> None:
    spec = _spec(2, checkpoint={"every_steps": 4, "every_seconds": None})
    plain = _run(session, spec)
    stopper = Stopper()
    held = session.controller.prepare(spec)
    held = dataclasses.replace(
        held,
        algorithm=ProgramOverride(held.algorithm, programs.lightgbm_held_at_round_5_until_stopped),
    )

    def stop_at_five(report: Any) -> None:
        if report.step >= 5:
            stopper.request()

    stopped = session.controller.run(held, stop=stopper, on_report=stop_at_five)
    assert stopped.status is JobStatus.STOPPED
    (attempt,) = session.store.attempts.of(stopped.id)
    assert attempt.checkpoint_step is not None and attempt.checkpoint_step >= 4
    resumed = session.controller.run(session.controller.prepare_resume(stopped.id))
    assert resumed.status is JobStatus.COMPLETED, session.store.attempts.of(resumed.id)
    steps = [p.step for p in session.store.metrics(resumed.id, "validation:auc")]
    assert steps == list(range(1, 13))  # each round once
    assert _trees(resumed) == _trees(plain)  # no sampling: the very trees


def test_a_killed_worker_is_retried_from_its_checkpoint(session: Session) -> None:
    spec = _spec(
        2,
        channels={"train": CHANNEL, "validation": CHANNEL, "test": CHANNEL},
        checkpoint={"every_steps": 4, "every_seconds": None},
    )
    plain = _run(session, spec)
    record = _run(session, spec, programs.lightgbm_rank1_killed_at_round_7)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    first, second = session.store.attempts.of(record.id)
    assert (first.reason or "").startswith("worker 1 exited unexpectedly"), first.reason
    assert (first.checkpoint_step, second.resumed_from_step) == (4, 4)
    assert record.final_metrics == plain.final_metrics  # the test channel's AUC too
    assert "test:auc" in record.final_metrics
    assert _trees(record) == _trees(plain)


def test_a_retry_from_the_last_rounds_checkpoint_grows_nothing_and_completes(
    session: Session,
) -> None:
    spec = _spec(
        2,
        channels={"train": CHANNEL, "validation": CHANNEL, "test": CHANNEL},
        checkpoint={"every_steps": 4, "every_seconds": None},
    )
    plain = _run(session, spec)
    record = _run(session, spec, programs.lightgbm_chief_killed_after_its_last_round)
    assert record.status is JobStatus.COMPLETED, session.store.attempts.of(record.id)
    first, second = session.store.attempts.of(record.id)
    assert (first.reason or "").startswith("worker 0 exited unexpectedly"), first.reason
    assert second.resumed_from_step == 12
    assert _trees(record) == _trees(plain)
    assert record.final_metrics == plain.final_metrics  # the test channel's AUC too


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"channels": {"train": CHANNEL, "validation": {**CHANNEL, "distribution": "sharded"}}},
            "channels.validation.distribution='sharded': LightGBM scores it on each worker",
        ),
        (
            {"distribution": {"strategy": "parameter_server"}},
            "distribution.strategy='parameter_server': lightgbm trains data-parallel",
        ),
        (
            {"hyperparameters": {"objective": "multiclass"}},
            "hyperparameters.objective='multiclass' needs hyperparameters.num_class",
        ),
        ({"hyperparameters": {"metric": ["gini"]}}, "metric: ['gini'] not among"),
        (
            {"hyperparameters": {"min_data_in_leaf": 0}},
            "hyperparameters.min_data_in_leaf: Input should be greater than or equal to 1 (got 0)",
        ),
    ],
)
def test_bad_input_is_one_line_naming_it(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        _spec(2, **fields)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
