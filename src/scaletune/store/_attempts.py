"""Every attempt of a training job: when it ran, how it ended, where it resumed from."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import Engine, insert, select, update

from scaletune.store._patience import Patience, patient, patient_once
from scaletune.store._records import AttemptRecord, JobStatus
from scaletune.store._schema import job_attempts


def _started(log: AttemptLog, job_id: str, number: int, *_args: object, **_kw: object) -> bool:
    query = select(job_attempts.c.id).where(
        job_attempts.c.job_id == job_id, job_attempts.c.number == number
    )
    with log._autocommit.connect() as conn:
        return conn.execute(query).first() is not None


class AttemptLog:
    def __init__(
        self, engine: Engine, autocommit: Engine, patience: Patience, describe: str
    ) -> None:
        self._engine, self._autocommit = engine, autocommit
        self.patience, self.describe = patience, describe

    @patient_once(_started)
    def start(
        self,
        job_id: str,
        number: int,
        start_time: float,
        *,
        resumed_from_step: int | None = None,
        steps_redone: int | None = None,
    ) -> None:
        with self._autocommit.connect() as conn:  # one statement: a transaction by itself
            conn.execute(
                insert(job_attempts).values(
                    job_id=job_id,
                    number=number,
                    start_time=start_time,
                    status=JobStatus.IN_PROGRESS.value,
                    retried=False,
                    resumed_from_step=resumed_from_step,
                    steps_redone=steps_redone,
                    checkpoint_step=resumed_from_step,
                )
            )

    def set_workers(self, job_id: str, number: int, locations: Sequence[str]) -> None:
        """Where the attempt's workers were placed, rank order."""
        self._update(job_id, number, workers=json.dumps(list(locations)))

    def set_checkpoint(self, job_id: str, number: int, step: int) -> None:
        self._update(job_id, number, checkpoint_step=step)

    def end(
        self,
        job_id: str,
        number: int,
        *,
        status: JobStatus,
        end_time: float,
        reason: str | None,
        retried: bool = False,
    ) -> None:
        self._update(
            job_id, number, status=status.value, end_time=end_time, reason=reason, retried=retried
        )

    @patient
    def end_abandoned(self, job_id: str, status: JobStatus, reason: str, end_time: float) -> None:
        """The attempt a dead controller left running ends with its job."""
        with self._engine.begin() as conn:
            conn.execute(
                update(job_attempts)
                .where(
                    job_attempts.c.job_id == job_id,
                    job_attempts.c.status == JobStatus.IN_PROGRESS.value,
                )
                .values(status=status.value, end_time=end_time, reason=reason)
            )

    @patient
    def of(self, job_id: str) -> list[AttemptRecord]:
        query = (
            select(job_attempts)
            .where(job_attempts.c.job_id == job_id)
            .order_by(job_attempts.c.number)
        )
        with self._autocommit.connect() as conn:
            return [
                AttemptRecord(
                    number=row.number,
                    start_time=row.start_time,
                    end_time=row.end_time,
                    status=JobStatus(row.status),
                    reason=row.reason,
                    retried=bool(row.retried),
                    resumed_from_step=row.resumed_from_step,
                    steps_redone=row.steps_redone,
                    checkpoint_step=row.checkpoint_step,
                    workers=tuple(json.loads(row.workers)) if row.workers else (),
                )
                for row in conn.execute(query)
            ]

    @patient
    def _update(self, /, job_id: str, number: int, **values: object) -> None:
        with self._autocommit.connect() as conn:  # one statement: a transaction by itself
            conn.execute(
                update(job_attempts)
                .where(job_attempts.c.job_id == job_id, job_attempts.c.number == number)
                .values(**values)
            )
