"""Reads that pages over the whole store need (the console's job lists, its live updates):
counts by status as one grouped query, and a mark that changes whenever anything a page
shows does, read from primary keys and the status index (a few index lookups at any size)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Engine, func, select

from scaletune.store._patience import Patience, patient
from scaletune.store._records import JobStatus
from scaletune.store._schema import job_attempts, metric_points, training_jobs, tuning_jobs


def job_filters(
    status: JobStatus | None, tuning_job_id: str | None, algorithm: str | None
) -> list[ColumnElement[bool]]:
    """The WHERE clauses of a filtered list of training jobs."""
    clauses: list[ColumnElement[bool]] = []
    if status is not None:
        clauses.append(training_jobs.c.status == status.value)
    if tuning_job_id is not None:
        clauses.append(training_jobs.c.tuning_job_id == tuning_job_id)
    if algorithm is not None:
        clauses.append(training_jobs.c.algorithm == algorithm)
    return clauses


@dataclass(frozen=True)
class ChangeMark:
    """Changes when a job is added, changes status, starts an attempt or reports a value;
    equal marks mean nothing a page shows has changed (a stop request shows once the job's
    status changes: counting flags would scan the table)."""

    last_point: int
    last_attempt: int
    training_statuses: tuple[tuple[str, int], ...]
    tuning_statuses: tuple[tuple[str, int], ...]

    def token(self) -> str:
        parts: list[Any] = [self.last_point, self.last_attempt]
        parts += [f"{s}={n}" for s, n in self.training_statuses]
        parts += [f"t{s}={n}" for s, n in self.tuning_statuses]
        return ".".join(map(str, parts))


class BrowseQueries:
    """Each read waits out an unreachable store as its owner's `patience` allows."""

    def __init__(self, engine: Engine, patience: Patience, describe: str) -> None:
        self._engine = engine
        self.patience, self.describe = patience, describe

    @patient
    def counts(
        self,
        *,
        status: JobStatus | None = None,
        tuning_job_id: str | None = None,
        algorithm: str | None = None,
    ) -> dict[JobStatus, int]:
        """How many training jobs of each status match the filters (every status listed)."""
        query = (
            select(training_jobs.c.status, func.count())
            .where(*job_filters(status, tuning_job_id, algorithm))
            .group_by(training_jobs.c.status)
        )
        with self._engine.connect() as conn:
            found = {JobStatus(s): int(n) for s, n in conn.execute(query)}
        return {s: found.get(s, 0) for s in JobStatus}

    @patient
    def algorithms(self) -> list[str]:
        query = select(training_jobs.c.algorithm).distinct().order_by(training_jobs.c.algorithm)
        with self._engine.connect() as conn:
            return list(conn.execute(query).scalars())

    @patient
    def tuning_counts(self) -> dict[JobStatus, int]:
        query = select(tuning_jobs.c.status, func.count()).group_by(tuning_jobs.c.status)
        with self._engine.connect() as conn:
            found = {JobStatus(s): int(n) for s, n in conn.execute(query)}
        return {s: found.get(s, 0) for s in JobStatus}

    @patient
    def change_mark(self) -> ChangeMark:
        with self._engine.connect() as conn:
            last_point = conn.execute(select(func.max(metric_points.c.id))).scalar()
            last_attempt = conn.execute(select(func.max(job_attempts.c.id))).scalar()
            training = conn.execute(
                select(training_jobs.c.status, func.count())
                .group_by(training_jobs.c.status)
                .order_by(training_jobs.c.status)
            ).all()
            tuning = conn.execute(
                select(tuning_jobs.c.status, func.count())
                .group_by(tuning_jobs.c.status)
                .order_by(tuning_jobs.c.status)
            ).all()
        return ChangeMark(
            last_point=int(last_point or 0),
            last_attempt=int(last_attempt or 0),
            training_statuses=tuple((str(s), int(n)) for s, n in training),
            tuning_statuses=tuple((str(s), int(n)) for s, n in tuning),
        )
