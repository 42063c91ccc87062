"""Preemption notices with real workers: a worker's machine about to go (its SIGTERM, or
`jobs notice` through the store) makes the job save a checkpoint at its next step and go on in
a new attempt, nothing redone and no retry spent; a notice too short to save in time is never
worse than a loss."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaletune.api import Session
from scaletune.cluster import Group, LocalBackend
from scaletune.cluster._slots import SlotCount
from scaletune.errors import StoreUnavailableError
from scaletune.spec import TrainingJobSpec, training_spec_from_dict
from scaletune.store import AttemptRecord, JobStatus, NoticeRecord, TrainingJobRecord
from scaletune.training._ending import Ending
from scaletune.training._notices import NoticeResponse
from scaletune.worker import Report, WorkerProgram
from tests.cluster import programs
from tests.cluster.programs import COUNTED_STEPS
from tests.conftest import pid_alive
from tests.training.test_controller import _ProgramOverride

BREAST_CANCER = {"dataset": "breast-cancer"}


def _spec(**fields: Any) -> TrainingJobSpec:
    raw: dict[str, Any] = {
        "algorithm": "xgboost",
        "instance_count": 2,
        "hyperparameters": {"num_round": 30, "max_depth": 3, "eval_metric": "auc"},
        "channels": {"train": BREAST_CANCER, "validation": BREAST_CANCER},
        "checkpoint": {"every_steps": 4, "every_seconds": None},
        "retry": {"max_attempts": 0},  # a notice must not need a retry
        **fields,
    }
    return training_spec_from_dict(raw)


def _run(
    session: Session,
    spec: TrainingJobSpec,
    at_step: int,
    action: Callable[[str, list[int]], None],
    program: WorkerProgram | None = None,
) -> tuple[TrainingJobRecord, list[list[int]]]:
    """Run `spec` (its workers running `program` if given); at the first attempt's report of
    `at_step`, `action(job_id, pids)`. Returns the job and each attempt's worker pids."""
    job = session.controller.prepare(spec)
    if program is not None:
        job = dataclasses.replace(job, algorithm=_ProgramOverride(program, tracker=False))
    groups: list[list[int]] = []

    def report(event: Report) -> None:
        if len(groups) == 1 and event.step == at_step:
            action(job.id, groups[0])

    record = session.controller.run(
        job, on_started=lambda group: groups.append(group.pids), on_report=report
    )
    return record, groups


def _notice(session: Session, rank: int, seconds: float) -> Callable[[str, list[int]], None]:
    """As `scaletune jobs notice ID --worker RANK --seconds S` gives it."""

    def give(job_id: str, pids: list[int]) -> None:
        session.store.notices.give(
            job_id, NoticeRecord(1, rank, seconds, "jobs notice", time.time())
        )

    return give


def _steps(session: Session, record: TrainingJobRecord, metric: str) -> list[int]:
    return [point.step for point in session.store.metrics(record.id, metric)]


def _stopped_then_completed(session: Session, record: TrainingJobRecord) -> list[AttemptRecord]:
    """The job completed in two attempts of 2 workers: the first ended by the notice (Stopped,
    not Failed), the second went on from its checkpoint."""
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    attempts = session.store.attempts.of(record.id)
    assert [(a.size, a.status) for a in attempts] == [
        (2, JobStatus.STOPPED),
        (2, JobStatus.COMPLETED),
    ]
    return attempts


def test_a_notice_saves_a_checkpoint_at_the_next_step_and_nothing_is_redone(
    session: Session,
) -> None:
    record, _ = _run(
        session, _spec(), 5, _notice(session, rank=1, seconds=30), programs.count_steps
    )

    attempts = _stopped_then_completed(session, record)
    assert attempts[0].reason == (
        "worker 1 got a preemption notice (jobs notice, 30 s): goes on at 2 workers from a "
        "checkpoint"
    )
    # From the checkpoint saved as it stopped, past the periodic ones: no step done twice.
    resumed = attempts[1].resumed_from_step
    assert resumed is not None and resumed >= 5
    assert attempts[1].steps_redone == 0
    assert _steps(session, record, "validation:logloss") == list(range(1, COUNTED_STEPS + 1))
    (notice,) = session.store.notices.of(record.id)
    assert (notice.attempt, notice.rank, notice.source) == (1, 1, "jobs notice")


def test_a_notice_too_short_to_save_in_is_a_loss_at_worst_never_a_failure(
    session: Session,
) -> None:
    # A program that never asks whether to stop: at the deadline its workers go unsaved.
    record, groups = _run(
        session,
        _spec(),
        5,
        _notice(session, rank=0, seconds=0.2),
        programs.count_steps_deaf_to_stops,
    )

    assert record.status is JobStatus.COMPLETED, record.failure_reason  # with no retries left
    attempts = session.store.attempts.of(record.id)
    assert [a.status for a in attempts] == [JobStatus.STOPPED, JobStatus.COMPLETED]
    assert "preemption notice (jobs notice, 0.2 s)" in (attempts[0].reason or "")
    resumed = attempts[1].resumed_from_step  # a periodic checkpoint, as after a loss
    assert resumed is not None and resumed % 4 == 0
    assert _steps(session, record, "validation:logloss") == list(range(1, COUNTED_STEPS + 1))
    assert not any(pid_alive(pid) for pid in groups[0])


def test_sigterm_to_a_fixed_size_xgboost_worker_ends_with_the_uninterrupted_model(
    session: Session,
) -> None:
    # Sampled rows and columns: a checkpoint falls on a sampling period's end (every 4
    # rounds here), and a stop the job goes on from trains on to the next one.
    sampled = {
        "num_round": 30,
        "max_depth": 3,
        "eval_metric": "auc",
        "subsample": 0.8,
        "colsample_bytree": 0.7,
    }
    plain = session.controller.run(session.controller.prepare(_spec(hyperparameters=sampled)))

    def sigterm(job_id: str, pids: list[int]) -> None:  # a pod's shutdown, a spot VM's notice
        os.kill(pids[1], signal.SIGTERM)

    record, groups = _run(session, _spec(hyperparameters=sampled), 6, sigterm)

    attempts = _stopped_then_completed(session, record)
    assert attempts[0].reason == (
        "worker 1 got a preemption notice (SIGTERM, 30 s): goes on at 2 workers from a checkpoint"
    )
    assert attempts[1].steps_redone == 0
    assert (attempts[1].resumed_from_step or 0) % 4 == 0
    assert _steps(session, record, "validation:auc") == list(range(1, 31))
    assert record.final_metrics == plain.final_metrics
    (notice,) = session.store.notices.of(record.id)
    assert (notice.rank, notice.source, notice.seconds) == (1, "SIGTERM", 30.0)
    assert not pid_alive(groups[0][1])  # its machine is going: the worker left with it


class _MachineGoes:
    """Two slots, until a worker's machine is on its way out: then one, until the job has
    asked for room `asks` times and not found it (a replacement machine joins)."""

    def __init__(self, asks: int) -> None:
        self.total, self._asks, self.refused = 2, asks, 0
        self._lock = threading.Lock()

    def going(self) -> None:
        with self._lock:
            self.total = 1

    def count(self) -> SlotCount:
        with self._lock:
            if self.total == 1:
                self.refused += 1  # a fixed 2-worker job asks only to place both
                if self.refused > self._asks:
                    self.total = 2
            return SlotCount(self.total)


def test_a_fixed_size_job_short_of_room_after_a_notice_waits_for_it_with_its_checkpoint(
    store_path: Path,
) -> None:
    slots = _MachineGoes(asks=3)
    started_with: list[int] = []  # the slots there were as each attempt's workers started
    with (
        LocalBackend(warm_pool=False, slots=slots) as backend,
        Session(store_path, backend=backend) as session,
    ):
        give = _notice(session, rank=1, seconds=30)

        def machine_goes(job_id: str, pids: list[int]) -> None:
            slots.going()  # its slot no longer offered, then the notice
            give(job_id, pids)

        job = dataclasses.replace(
            session.controller.prepare(_spec()),
            algorithm=_ProgramOverride(programs.count_steps, tracker=False),
        )
        groups: list[list[int]] = []

        def report(event: Report) -> None:
            if len(groups) == 1 and event.step == 5:
                machine_goes(job.id, groups[0])

        def started(group: Group) -> None:
            groups.append(group.pids)
            started_with.append(slots.total)

        record = session.controller.run(job, on_started=started, on_report=report)

        attempts = _stopped_then_completed(session, record)
        assert slots.refused > 3  # it asked for room and found none, three times
        assert started_with == [2, 2]  # the second attempt started once the room was back
        resumed = attempts[1].resumed_from_step
        assert resumed is not None and resumed >= 5  # the checkpoint saved at the notice
        assert attempts[1].steps_redone == 0
        assert _steps(session, record, "validation:logloss") == list(range(1, COUNTED_STEPS + 1))


def _respond(
    spec: TrainingJobSpec, size: int, leaving: list[int], *, in_tuning_job: bool = False
) -> tuple[Ending, list[int]]:
    """The response to notices to these ranks of an attempt at `size`, on a capacity where
    the workers staying could grow to 3; and the sizes `placeable` was asked about."""
    asked: list[int] = []

    def placeable(staying: int) -> int:
        asked.append(staying)
        return 3 if spec.elastic else spec.instance_count

    response = NoticeResponse(spec, size, in_tuning_job=in_tuning_job, placeable=placeable)
    notices = [NoticeRecord(1, rank, 30.0, "jobs notice", 0.0) for rank in leaving]
    return response(notices), asked


def test_an_elastic_job_goes_on_without_the_leaving_workers_as_the_room_allows() -> None:
    elastic = _spec(instance_count={"min": 2, "max": 4})
    ending, asked = _respond(elastic, 4, [0, 2])
    assert asked == [2]  # placed beside the two staying, wherever there is room
    assert ending == Ending(
        JobStatus.STOPPED,
        "workers 0, 2 got a preemption notice (jobs notice, 30 s): goes on at 3 workers from a "
        "checkpoint",
        resize_to=3,
    )
    # The same in a tuning job: a trial with enough workers left is not paused.
    in_tuning, _ = _respond(elastic, 4, [1], in_tuning_job=True)
    assert (in_tuning.status, in_tuning.resize_to) == (JobStatus.STOPPED, 3)


def test_a_job_left_too_small_waits_for_room_at_its_size_or_a_trial_pauses() -> None:
    fixed = _spec(instance_count=2)
    ending, _ = _respond(fixed, 2, [1])
    assert (ending.status, ending.resize_to) == (JobStatus.STOPPED, 2)  # placing it waits
    # An elastic job that would go below its fewest waits for them, as `placeable` says.
    elastic = _spec(instance_count={"min": 3, "max": 4})
    ending, asked = _respond(elastic, 3, [2])
    assert asked == [2] and (ending.status, ending.resize_to) == (JobStatus.STOPPED, 3)
    for spec, size in [(fixed, 2), (elastic, 3)]:  # a trial pauses: resumed first, later
        paused, asked = _respond(spec, size, [0], in_tuning_job=True)
        assert asked == [] and paused == Ending(
            JobStatus.PAUSED,
            "worker 0 got a preemption notice (jobs notice, 30 s): paused at a checkpoint, to "
            "be resumed first",
        )


def test_a_notice_with_the_room_unknown_goes_on_without_the_leavers_or_at_its_size() -> None:
    def store_away(staying: int) -> int:
        raise StoreUnavailableError("the store is away")

    notice = [NoticeRecord(1, 1, 30.0, "SIGTERM", 0.0)]
    for spec, size, expected in [
        (_spec(instance_count={"min": 2, "max": 4}), 4, 3),
        (_spec(instance_count={"min": 3, "max": 4}), 3, 3),
        (_spec(instance_count=2), 2, 2),
    ]:
        ending = NoticeResponse(spec, size, in_tuning_job=False, placeable=store_away)(notice)
        assert (ending.status, ending.resize_to) == (JobStatus.STOPPED, expected)
