"""Reads over all the trials of a tuning job, as SQL aggregates and indexed scans: what a
summary, the analytics table and a report need, at 10,000 trials and more, without loading
every record (or every trial's spec) into Python."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import Engine, and_, case, func, literal, select

from scaletune.spec._names import CapacityClass
from scaletune.store._patience import Patience, patient
from scaletune.store._records import JobStatus, MetricPoint
from scaletune.store._schema import metric_points, training_jobs

_TERMINAL = [status.value for status in JobStatus if status.is_terminal]


@dataclass(frozen=True)
class TrialRow:
    """A trial as tables and pictures show it: no spec, no final metrics."""

    id: str
    trial_number: int | None
    status: JobStatus
    algorithm: str
    hyperparameters: dict[str, Any]
    instance_count: int
    start_time: float | None
    end_time: float | None
    wall_seconds: float | None
    billable_seconds: float | None
    objective: float | None
    resource: int | None
    failure_reason: str | None
    full_resource: int | None
    seconds_per_step: float | None
    hyperband_bracket: int | None = None
    final_metrics: dict[str, float] | None = None  # read only where asked for (`results`)


@dataclass(frozen=True)
class TuningTotals:
    """What a tuning job's trials add up to."""

    trials: int
    job_counts: dict[JobStatus, int]
    billable_seconds: float
    sequential_wall_seconds: float
    # Billable seconds the stopped trials would have added had they run to their end (at
    # their own seconds per step, else the median trial's), on all their workers.
    unspent_seconds: float
    waiting_for_room: list[str]  # trials whose workers wait for a busy cluster to make room


_ROW_COLUMNS = [
    training_jobs.c.id,
    training_jobs.c.trial_number,
    training_jobs.c.status,
    training_jobs.c.algorithm,
    training_jobs.c.hyperparameters,
    training_jobs.c.instance_count,
    training_jobs.c.start_time,
    training_jobs.c.end_time,
    training_jobs.c.wall_seconds,
    training_jobs.c.billable_seconds,
    training_jobs.c.objective,
    training_jobs.c.resource,
    training_jobs.c.failure_reason,
    training_jobs.c.full_resource,
    training_jobs.c.seconds_per_step,
    training_jobs.c.hyperband_bracket,
]


_STATUSES = {status.value: status for status in JobStatus}


def _trial_row(row: Any, **more: Any) -> TrialRow:
    """A row of _ROW_COLUMNS (the first fields of TrialRow, in order) as a TrialRow: by
    position, which at 100,000 rows takes a third of the time of building mappings."""
    values = list(row[: len(_ROW_COLUMNS)])
    values[2] = _STATUSES[values[2]]
    return TrialRow(*values, **more)


class TrialSortKey(StrEnum):
    TRIAL = "trial"
    OBJECTIVE = "objective"
    STATUS = "status"
    RESOURCE = "resource"
    BILLABLE = "billable"
    WORKERS = "workers"
    WALL = "wall"


_SORT_COLUMNS = {
    TrialSortKey.TRIAL: training_jobs.c.trial_number,
    TrialSortKey.OBJECTIVE: training_jobs.c.objective,
    TrialSortKey.STATUS: training_jobs.c.status,
    TrialSortKey.RESOURCE: training_jobs.c.resource,
    TrialSortKey.BILLABLE: training_jobs.c.billable_seconds,
    TrialSortKey.WORKERS: training_jobs.c.instance_count,
    TrialSortKey.WALL: training_jobs.c.wall_seconds,
}


@dataclass(frozen=True)
class TrialOrder:
    key: TrialSortKey = TrialSortKey.TRIAL
    descending: bool = False

    def clauses(self) -> list[Any]:
        column = _SORT_COLUMNS[self.key]
        # NULLs last either way (SQLite and PostgreSQL disagree on where they go by default)
        return [
            column.is_(None),
            column.desc() if self.descending else column.asc(),
            training_jobs.c.trial_number,
        ]


def page_of_ids(where: Any, clauses: list[Any], offset: int, limit: int | None) -> Any:
    """The ids of one page of trials, sorted by `clauses` (TrialOrder's); by objective, the
    version-9 indexes hold them in that order."""
    return select(training_jobs.c.id).where(where).order_by(*clauses).offset(offset).limit(limit)


class TrialQueries:
    """Each read waits out an unreachable store as its owner's `patience` allows."""

    def __init__(self, engine: Engine, patience: Patience, describe: str) -> None:
        self._engine = engine
        self.patience, self.describe = patience, describe

    @patient
    def totals(self, tuning_id: str, max_resource: int | None) -> TuningTotals:
        of_job = training_jobs.c.tuning_job_id == tuning_id
        counts = (
            select(
                training_jobs.c.status,
                func.count(),
                func.coalesce(func.sum(training_jobs.c.billable_seconds), 0.0),
                func.coalesce(func.sum(training_jobs.c.wall_seconds), 0.0),
            )
            .where(of_job)
            .group_by(training_jobs.c.status)
        )
        waiting = select(training_jobs.c.id).where(
            of_job,
            training_jobs.c.waiting_since.is_not(None),
            training_jobs.c.status.not_in(_TERMINAL),
        )
        with self._engine.connect() as conn:
            by_status = {JobStatus(row[0]): row[1:] for row in conn.execute(counts)}
            typical = self._median_seconds_per_step(conn, tuning_id)
            unspent = conn.execute(self._unspent(tuning_id, max_resource, typical)).scalar()
            waiting_ids = list(conn.execute(waiting.order_by(training_jobs.c.trial_number)))
        return TuningTotals(
            trials=sum(int(row[0]) for row in by_status.values()),
            job_counts={status: int(by_status.get(status, (0,))[0]) for status in JobStatus},
            billable_seconds=sum(float(row[1]) for row in by_status.values()),
            sequential_wall_seconds=sum(float(row[2]) for row in by_status.values()),
            unspent_seconds=float(unspent or 0.0),
            waiting_for_room=[row[0] for row in waiting_ids],
        )

    @patient
    def billable_by_class(self, tuning_id: str) -> dict[str, float]:
        """The trials' billable seconds on each capacity class, summed (for a report: one
        small JSON value a trial, read once; trials from before classes were kept count
        nowhere)."""
        billed = training_jobs.c.billable_by_class
        classes = [capacity.value for capacity in CapacityClass]
        query = select(
            *(func.sum(billed[name].as_float()) for name in classes),
            *(func.count(billed[name].as_float()) for name in classes),
        ).where(training_jobs.c.tuning_job_id == tuning_id, billed.is_not(None))
        with self._engine.connect() as conn:
            row = conn.execute(query).one()
        sums, counts = row[: len(classes)], row[len(classes) :]
        return {
            name: float(total or 0.0)
            for name, total, count in zip(classes, sums, counts, strict=True)
            if count
        }

    @staticmethod
    def _unspent(tuning_id: str, max_resource: int | None, typical: float | None) -> Any:
        full: Any = training_jobs.c.full_resource
        if max_resource is not None:
            full = case((full > max_resource, literal(max_resource)), else_=full)
        remaining = full - training_jobs.c.resource
        per_step = (
            training_jobs.c.seconds_per_step
            if typical is None
            else func.coalesce(training_jobs.c.seconds_per_step, literal(typical))
        )
        return select(func.sum(remaining * per_step * training_jobs.c.instance_count)).where(
            training_jobs.c.tuning_job_id == tuning_id,
            # Paused ones too: while the tuning job runs, their rest is not spent (yet).
            training_jobs.c.status.in_([JobStatus.STOPPED.value, JobStatus.PAUSED.value]),
            training_jobs.c.resource > 0,
            remaining > 0,
        )

    @staticmethod
    def _median_seconds_per_step(conn: Any, tuning_id: str) -> float | None:
        known = and_(
            training_jobs.c.tuning_job_id == tuning_id,
            training_jobs.c.seconds_per_step.is_not(None),
        )
        count = conn.execute(select(func.count()).where(known)).scalar_one()
        if not count:
            return None
        middle = conn.execute(
            select(training_jobs.c.seconds_per_step)
            .where(known)
            .order_by(training_jobs.c.seconds_per_step)
            .offset((count - 1) // 2)
            .limit(2 - count % 2)  # the middle value, or the two around the middle
        ).scalars()
        values = [float(value) for value in middle]
        return sum(values) / len(values)

    @patient
    def rows(
        self,
        tuning_id: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        order: TrialOrder | None = None,
        statuses: Sequence[JobStatus] | None = None,
    ) -> list[TrialRow]:
        """The trials in the order they were proposed, or a page of them sorted in SQL by
        `order` (ties, and rows with no value, last, then by trial number)."""
        of_job = training_jobs.c.tuning_job_id == tuning_id
        if statuses is not None:
            of_job = and_(of_job, training_jobs.c.status.in_([s.value for s in statuses]))
        clauses = (order or TrialOrder()).clauses()
        if limit is None and not offset:
            query = select(*_ROW_COLUMNS).where(of_job).order_by(*clauses)
        else:
            # A page: sort and skip the narrow keys alone, then read only the page's rows
            # (sorting 100,000 whole rows, settings and all, to keep 50 took most of a second).
            page = page_of_ids(of_job, clauses, offset, limit).subquery()
            query = (
                select(*_ROW_COLUMNS).join(page, page.c.id == training_jobs.c.id).order_by(*clauses)
            )
        with self._engine.connect() as conn:
            return [_trial_row(row) for row in conn.execute(query)]

    @patient
    def results(
        self,
        tuning_id: str,
        statuses: Sequence[JobStatus],
        *,
        objective_at_least: float | None = None,
        objective_at_most: float | None = None,
    ) -> list[TrialRow]:
        """The trials in `statuses` with their final metrics (what several objectives and
        constraints are judged on), or only those whose objective is within the bounds."""
        query = select(*_ROW_COLUMNS, training_jobs.c.final_metrics).where(
            training_jobs.c.tuning_job_id == tuning_id,
            training_jobs.c.status.in_([s.value for s in statuses]),
        )
        if objective_at_least is not None:
            query = query.where(training_jobs.c.objective >= objective_at_least)
        if objective_at_most is not None:
            query = query.where(training_jobs.c.objective <= objective_at_most)
        with self._engine.connect() as conn:
            return [
                _trial_row(row, final_metrics=dict(row.final_metrics or {}))
                for row in conn.execute(query.order_by(training_jobs.c.trial_number))
            ]

    @patient
    def curves(
        self,
        tuning_id: str,
        name: str,
        *,
        job_ids: Sequence[str] | None = None,
        min_resource: int | None = None,
        max_step: int | None = None,
    ) -> dict[str, list[MetricPoint]]:
        """Every trial's series of one metric, in one indexed read, by job id; or only those
        of `job_ids`, or of the trials that reached `min_resource`, up to `max_step`."""
        query = (
            select(
                metric_points.c.job_id,
                metric_points.c.step,
                metric_points.c.value,
                metric_points.c.time,
            )
            .join(training_jobs, training_jobs.c.id == metric_points.c.job_id)
            .where(training_jobs.c.tuning_job_id == tuning_id, metric_points.c.name == name)
            .order_by(metric_points.c.job_id, metric_points.c.step, metric_points.c.id)
        )
        if job_ids is not None:
            query = query.where(training_jobs.c.id.in_(list(job_ids)))
        if min_resource is not None:
            query = query.where(training_jobs.c.resource >= min_resource)
        if max_step is not None:
            query = query.where(metric_points.c.step <= max_step)
        curves: dict[str, list[MetricPoint]] = defaultdict(list)
        with self._engine.connect() as conn:
            for job_id, step, value, time in conn.execute(query):
                curves[job_id].append(MetricPoint(name, step, value, time))
        return dict(curves)
