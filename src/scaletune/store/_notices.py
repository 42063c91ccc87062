"""The preemption notices a job's workers got: written by whoever learns of one (the job's
controller for a worker's SIGTERM, `jobs notice` for a spot watcher), read by the controller
at each stop check and by `jobs show`."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from scaletune.store._patience import Patience, patient, patient_once
from scaletune.store._records import NoticeRecord
from scaletune.store._schema import worker_notices


def _given(log: NoticeLog, job_id: str, notice: NoticeRecord) -> bool:
    query = select(worker_notices.c.id).where(
        worker_notices.c.job_id == job_id,
        worker_notices.c.attempt == notice.attempt,
        worker_notices.c.rank == notice.rank,
        worker_notices.c.given_at == notice.given_at,
    )
    with log._autocommit.connect() as conn:
        return conn.execute(query).first() is not None


class NoticeLog:
    def __init__(self, autocommit: Engine, patience: Patience, describe: str) -> None:
        self._autocommit = autocommit
        self.patience, self.describe = patience, describe

    @patient_once(_given)
    def give(self, job_id: str, notice: NoticeRecord) -> None:
        with self._autocommit.connect() as conn:  # one statement: a transaction by itself
            conn.execute(
                insert(worker_notices).values(
                    job_id=job_id,
                    attempt=notice.attempt,
                    rank=notice.rank,
                    seconds=notice.seconds,
                    source=notice.source,
                    given_at=notice.given_at,
                )
            )

    @patient
    def of(self, job_id: str, attempt: int | None = None) -> list[NoticeRecord]:
        """A job's notices, oldest first: all of them, or one attempt's."""
        query = select(worker_notices).where(worker_notices.c.job_id == job_id)
        if attempt is not None:
            query = query.where(worker_notices.c.attempt == attempt)
        with self._autocommit.connect() as conn:
            return [
                NoticeRecord(
                    attempt=row.attempt,
                    rank=row.rank,
                    seconds=row.seconds,
                    source=row.source,
                    given_at=row.given_at,
                )
                for row in conn.execute(query.order_by(worker_notices.c.id))
            ]
