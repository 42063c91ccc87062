"""Elastic jobs with real workers and real kills: a job that loses capacity goes on with the
workers left, grows back when capacity returns, and is recorded and billed at each size."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scaletune.api import Session
from scaletune.cluster import Group, LocalBackend, SlotsFile
from scaletune.spec import load_training_spec, training_spec_from_dict
from scaletune.store import JobStatus, TrainingJobRecord, resizes
from scaletune.worker import Report
from tests.conftest import pid_alive, pooled
from tests.jobs import digits_job

DIGITS = {"dataset": "digits"}
BREAST_CANCER = {"dataset": "breast-cancer"}


@pytest.fixture(scope="module")
def capacity(tmp_path_factory: pytest.TempPathFactory) -> SlotsFile:
    """The slots this machine offers, as spot capacity that a test takes and gives back."""
    slots = SlotsFile(tmp_path_factory.mktemp("slots") / "slots")
    slots.write(4)
    return slots


@pytest.fixture(scope="module")
def elastic_backend(capacity: SlotsFile) -> Iterator[LocalBackend]:
    with pooled(LocalBackend(max_idle_workers=4, slots=capacity)) as backend:
        yield backend


@pytest.fixture
def elastic(
    store_path: Path, elastic_backend: LocalBackend, capacity: SlotsFile
) -> Iterator[Session]:
    capacity.write(4)
    with Session(store_path, backend=elastic_backend) as opened:
        yield opened


class Script:
    """What a test does as the job runs: at a report of some attempt, an action."""

    def __init__(self) -> None:
        self.groups: list[list[int]] = []  # each attempt's worker pids
        self.actions: dict[tuple[int, int], Callable[[], None]] = {}

    def at(self, attempt: int, step: int, action: Callable[[], None]) -> None:
        self.actions[(attempt, step)] = action

    def started(self, group: Group) -> None:
        self.groups.append(group.pids)

    def report(self, event: Report) -> None:
        action = self.actions.pop((len(self.groups), event.step), None)
        if action is not None:
            action()

    def kill(self, rank: int) -> Callable[[], None]:
        return lambda: os.kill(self.groups[-1][rank], signal.SIGKILL)


def _run(session: Session, raw: dict[str, Any], script: Script) -> TrainingJobRecord:
    job = session.controller.prepare(training_spec_from_dict(raw))
    return session.controller.run(job, on_started=script.started, on_report=script.report)


def _dnn(epochs: int, **fields: Any) -> dict[str, Any]:
    return {
        "algorithm": "dnn",
        "instance_count": {"min": 2, "max": 4},
        "hyperparameters": {
            "hidden_units": 32,
            "batch_size": 16,
            "learning_rate": 0.05,
            "momentum": 0.9,
            "epochs": epochs,
            "lr_scaling": "sqrt",
        },
        "channels": {"train": DIGITS, "validation": DIGITS},
        "checkpoint": {"every_steps": 5, "every_seconds": None},
        **fields,
    }


def test_a_dnn_job_that_loses_a_worker_goes_on_with_three_then_grows_back_to_four(
    elastic: Session, capacity: SlotsFile
) -> None:
    script = Script()

    def preempt() -> None:  # a machine goes away: its slot, and the worker on it
        capacity.write(3)
        script.kill(3)()

    script.at(1, 2, preempt)
    script.at(2, 4, lambda: capacity.write(4))  # a machine comes back
    record = _run(elastic, _dnn(epochs=10), script)

    assert record.status is JobStatus.COMPLETED, record.failure_reason
    attempts = elastic.store.attempts.of(record.id)
    assert [a.size for a in attempts] == [4, 3, 4]
    assert [a.status for a in attempts] == [
        JobStatus.FAILED,
        JobStatus.STOPPED,
        JobStatus.COMPLETED,
    ]
    changes = resizes(attempts)
    assert [(c.from_size, c.to_size) for c in changes] == [(4, 3), (3, 4)]
    assert changes[0].reason == "worker 3 exited unexpectedly (killed by SIGKILL)"
    assert changes[1].reason == "resized to 4 workers: room for more"
    # Each attempt goes on from the checkpoint the one before it left (the grow saves one as
    # it stops), none from the start.
    assert attempts[1].resumed_from_step is not None and attempts[2].resumed_from_step
    assert attempts[2].resumed_from_step >= attempts[1].resumed_from_step
    # Every epoch reported once, in order: nothing duplicated across the resizes.
    steps = [p.step for p in elastic.store.metrics(record.id, "validation:accuracy")]
    assert steps == list(range(1, 11))
    assert record.final_metrics["validation:accuracy"] > 0.9
    # Billed per period at its size: between three and four workers' worth of the wall time.
    wall = record.wall_seconds or 0.0
    assert 3 * wall < (record.billable_seconds or 0.0) < 4 * wall
    assert not any(pid_alive(pid) for pid in script.groups[0][3:])  # the killed one is gone


def test_a_notice_to_a_dnn_worker_shrinks_the_job_at_a_checkpoint_with_nothing_redone(
    elastic: Session, capacity: SlotsFile
) -> None:
    script = Script()

    def notice() -> None:  # a machine says it goes: its slot, then SIGTERM to its worker
        capacity.write(3)
        os.kill(script.groups[-1][3], signal.SIGTERM)

    script.at(1, 2, notice)
    channels = {"train": DIGITS, "validation": DIGITS, "test": DIGITS}
    record = _run(elastic, _dnn(epochs=6, retry={"max_attempts": 0}, channels=channels), script)

    assert record.status is JobStatus.COMPLETED, record.failure_reason
    attempts = elastic.store.attempts.of(record.id)
    assert [(a.size, a.status) for a in attempts] == [
        (4, JobStatus.STOPPED),
        (3, JobStatus.COMPLETED),
    ]
    assert [c.reason for c in resizes(attempts)] == [
        "worker 3 got a preemption notice (SIGTERM, 30 s): goes on at 3 workers from a checkpoint"
    ]
    # Saved as it stopped, mid-epoch: the next attempt redoes no reported epoch (the test
    # metrics wait for the job's end: nothing is reported past the checkpoint).
    assert attempts[1].resumed_from_step is not None and attempts[1].steps_redone == 0
    assert [p.step for p in elastic.store.metrics(record.id, "test:accuracy")] == [6]
    steps = [p.step for p in elastic.store.metrics(record.id, "validation:accuracy")]
    assert steps == list(range(1, 7))
    assert record.final_metrics["validation:accuracy"] > 0.9
    assert not pid_alive(script.groups[0][3])  # gone with its machine, not pooled


# Rounds enough that a kill at round 6 lands while the job runs: the controller sees reports
# in gathers (Timing.gather_seconds), and a dozen of breast cancer's rounds take less.
ROUNDS = 60


def _xgboost(**fields: Any) -> dict[str, Any]:
    return {
        "algorithm": "xgboost",
        "instance_count": {"min": 1, "max": 3},
        "hyperparameters": {"num_round": ROUNDS, "max_depth": 3, "eval_metric": "auc"},
        "channels": {"train": BREAST_CANCER, "validation": BREAST_CANCER},
        "checkpoint": {"every_steps": 4, "every_seconds": None},
        **fields,
    }


def test_an_xgboost_job_shrunk_by_a_lost_worker_ends_with_the_fixed_size_auc(
    elastic: Session, capacity: SlotsFile
) -> None:
    plain = _run(elastic, _xgboost(instance_count=3), Script())
    script = Script()

    def preempt() -> None:
        capacity.write(2)
        script.kill(2)()

    script.at(1, 6, preempt)
    record = _run(elastic, _xgboost(), script)

    assert record.status is JobStatus.COMPLETED, record.failure_reason
    attempts = elastic.store.attempts.of(record.id)
    assert [a.size for a in attempts] == [3, 2]
    resumed = attempts[1].resumed_from_step  # the killed worker's peers may pass round 8
    assert resumed is not None and resumed % 4 == 0
    steps = [p.step for p in elastic.store.metrics(record.id, "train:auc")]
    assert steps == list(range(1, ROUNDS + 1))
    assert record.final_metrics["validation:auc"] == pytest.approx(
        plain.final_metrics["validation:auc"], abs=1e-3
    )


def test_a_lightgbm_job_shrunk_by_a_lost_worker_grows_the_same_trees(
    elastic: Session, capacity: SlotsFile
) -> None:
    raw = {
        **_xgboost(instance_count={"min": 2, "max": 3}),
        "algorithm": "lightgbm",
        "hyperparameters": {"num_boost_round": ROUNDS, "num_leaves": 7, "metric": ["auc"]},
    }
    plain = _run(elastic, {**raw, "instance_count": 3}, Script())
    script = Script()

    def preempt() -> None:
        capacity.write(2)
        script.kill(2)()

    script.at(1, 6, preempt)
    record = _run(elastic, raw, script)

    assert record.status is JobStatus.COMPLETED, record.failure_reason
    attempts = elastic.store.attempts.of(record.id)
    assert [a.size for a in attempts] == [3, 2]
    resumed = attempts[1].resumed_from_step  # the killed worker's peers may pass round 8
    assert resumed is not None and resumed % 4 == 0
    steps = [p.step for p in elastic.store.metrics(record.id, "validation:auc")]
    assert steps == list(range(1, ROUNDS + 1))
    # Bins from the whole channel at every size, and LightGBM's data-parallel learner alike
    # on 2 workers as on 3: the same trees as the job that kept its 3.
    models = [Path(r.artifact or "", "lightgbm-model.txt").read_text() for r in (plain, record)]
    assert models[0].split("end of trees")[0] == models[1].split("end of trees")[0]


def test_a_size_asked_for_by_hand_is_taken_at_the_next_checkpoint(elastic: Session) -> None:
    script = Script()
    job_ids: list[str] = []

    def ask_for_two() -> None:  # as `scaletune jobs resize ID 2` does
        elastic.store.request_size(job_ids[0], 2)

    script.at(1, 3, ask_for_two)
    job = elastic.controller.prepare(training_spec_from_dict(_dnn(epochs=10)))
    job_ids.append(job.id)
    record = elastic.controller.run(job, on_started=script.started, on_report=script.report)

    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert record.requested_size == 2
    changes = resizes(elastic.store.attempts.of(record.id))
    assert [(c.from_size, c.to_size, c.reason) for c in changes] == [
        (4, 2, "resized to 2 workers: asked for (jobs resize)")
    ]
    steps = [p.step for p in elastic.store.metrics(record.id, "validation:accuracy")]
    assert steps == list(range(1, 11))


def test_fewer_slots_than_the_fewest_workers_waits_then_fails_with_the_reason(
    elastic: Session, capacity: SlotsFile
) -> None:
    capacity.write(1)
    raw = _xgboost(instance_count={"min": 2, "max": 3}, retry={"placement_timeout_seconds": 1})
    record = _run(elastic, raw, Script())
    assert record.status is JobStatus.FAILED
    assert record.failure_reason == (
        "2 workers (its fewest) could not be placed within retry.placement_timeout_seconds=1"
    )
    attempts = elastic.store.attempts.of(record.id)
    assert len(attempts) == 1 and attempts[0].workers == ()  # never placed, not retried


EPOCHS = 20


def test_a_script_starts_again_at_each_size_with_its_new_world_size(
    elastic: Session, capacity: SlotsFile, tmp_path: Path
) -> None:
    # examples/script-ddp-elastic.toml, from 1 worker up, on 2 slots: it starts with 2, loses
    # one, goes on alone from its latest epoch's checkpoint, then grows back to 2 (each size
    # a new process of PyTorch per worker: the fewest that show it). An epoch of digits takes
    # 20 to 100 ms; the room back at epoch 3 is taken at the controller's next check (0.5 s)
    # and the scripts' next epoch end: epochs enough to outlast that.
    capacity.write(2)
    spec = load_training_spec(
        digits_job("script-ddp-elastic.toml", tmp_path),
        [f"hyperparameters.epochs={EPOCHS}", "instance_count.min=1"],
    )
    script = Script()

    def preempt() -> None:  # after epoch 1's checkpoint: epoch 2 is reported after it
        capacity.write(1)
        script.kill(1)()

    script.at(1, 2, preempt)
    script.at(2, 3, lambda: capacity.write(2))
    job = elastic.controller.prepare(spec)
    record = elastic.controller.run(job, on_started=script.started, on_report=script.report)

    assert record.status is JobStatus.COMPLETED, record.failure_reason
    attempts = elastic.store.attempts.of(record.id)
    assert [a.size for a in attempts] == [2, 1, 2], [(a.size, a.reason) for a in attempts]
    assert all(a.resumed_from_step for a in attempts[1:])  # each from a checkpoint
    steps = [p.step for p in elastic.store.metrics(record.id, "validation:accuracy")]
    assert steps == list(range(1, EPOCHS + 1))
    assert record.final_metrics["validation:accuracy"] > 0.9
    # Rank 0's script said the world size it was started with, each time.
    said = [
        line.split(",")[0]
        for line in job.paths.log_path(0).read_text().splitlines()
        if line.startswith("rank 0 of ")
    ]
    assert said == ["rank 0 of 2", "rank 0 of 1", "rank 0 of 2"]
