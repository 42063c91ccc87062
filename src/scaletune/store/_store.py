"""The single source of truth for jobs and metrics. Every write is one transaction: a
single statement runs in autocommit (on a server, one round trip instead of three), more than
one inside BEGIN ... COMMIT; reads run in autocommit.

Past 400 lines on purpose: one method per query, each a few lines of SQL, so that every
question the rest of scaletune asks the database is found here (attempts and the schema's
migrations live apart, in `_attempts` and `_migrate`)."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    JSON,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from scaletune.errors import (
    InvalidInputError,
    JobNotFoundError,
    StoreError,
    StoreUnavailableError,
)
from scaletune.store._attempts import AttemptLog
from scaletune.store._browse import BrowseQueries, job_filters
from scaletune.store._engine import engines_for, safe_url
from scaletune.store._migrate import open_schema
from scaletune.store._notices import NoticeLog
from scaletune.store._patience import (
    CONTROLLER_PATIENCE,
    NO_WAIT,
    Patience,
    is_transient,
    patient,
    patient_once,
)
from scaletune.store._queries import TrialQueries
from scaletune.store._records import (
    JobOutcome,
    JobStatus,
    MetricPoint,
    NewTrainingJob,
    NewTuningJob,
    RejectedMetric,
    TrainingJobRecord,
    TuningJobRecord,
)
from scaletune.store._schema import (
    SCHEMA_VERSION,
    job_attempts,
    meta,
    metric_points,
    rejected_metrics,
    training_jobs,
    tuning_jobs,
)

PRICES_KEY = "prices"  # in the meta table: a worker-second's price on each capacity class

# One UPDATE per table whose SET clause is the parameters given: compiled once per set of
# columns and cached, where `.values(...)` would build and compile the statement every time.
_UPDATE_BY_ID = {
    table.name: update(table).where(table.c.id == bindparam("row_id"))
    for table in (training_jobs, tuning_jobs)
}
# The reads the tuning loop makes for every trial, built once: building a statement and its
# cache key costs more than SQLite's part in running it.
_JOB_BY_ID = select(training_jobs).where(training_jobs.c.id == bindparam("job_id"))
_METRICS_OF_JOB = (
    select(metric_points.c.name, metric_points.c.step, metric_points.c.value, metric_points.c.time)
    .where(metric_points.c.job_id == bindparam("job_id"))
    .order_by(metric_points.c.name, metric_points.c.step, metric_points.c.id)
)
_METRIC_OF_JOB = _METRICS_OF_JOB.where(metric_points.c.name == bindparam("name"))
RecordT = TypeVar("RecordT", TrainingJobRecord, TuningJobRecord)
# PostgreSQL: a job's ending and its last reports in one statement, its own transaction (a
# data-modifying WITH over arrays): one round trip where a transaction takes four.
_FINISH_WITH_POINTS_PG = text(
    "WITH points AS (INSERT INTO metric_points (job_id, name, step, value, time) "
    "SELECT :row_id, * FROM unnest(CAST(:names AS varchar[]), CAST(:steps AS integer[]), "
    "CAST(:point_values AS float8[]), CAST(:times AS float8[]))) "
    "UPDATE training_jobs SET status = :status, start_time = :start_time, "
    "end_time = :end_time, wall_seconds = :wall_seconds, "
    "billable_seconds = :billable_seconds, billable_by_class = :billable_by_class, "
    "final_metrics = :final_metrics, failure_reason = :failure_reason, "
    "artifact = :artifact, waiting_since = :waiting_since WHERE id = :row_id"
).bindparams(
    bindparam("billable_by_class", type_=JSON),
    bindparam("final_metrics", type_=JSON),
)


def _job_landed(store: Store, job: NewTrainingJob, *_args: object) -> bool:
    return store._exists(training_jobs, training_jobs.c.id == job.id)


def _tuning_job_landed(store: Store, job: NewTuningJob) -> bool:
    return store._exists(tuning_jobs, tuning_jobs.c.id == job.id)


def _ending_landed(store: Store, job_id: str, outcome: JobOutcome, *_args: object) -> bool:
    c = training_jobs.c
    return store._exists(
        training_jobs,
        c.id == job_id,
        c.status == outcome.status.value,
        c.end_time == outcome.end_time,
    )


def _reopen_landed(store: Store, job_id: str) -> bool:
    c = training_jobs.c
    return store._exists(training_jobs, c.id == job_id, c.status == JobStatus.PENDING.value)


def _points_landed(store: Store, job_id: str, points: Sequence[MetricPoint]) -> bool:
    """One batch is one transaction: its first point stored means all of it is."""
    return _reported_landed(store, metric_points, job_id, points[0])


def _rejected_landed(store: Store, job_id: str, rejected: Sequence[RejectedMetric]) -> bool:
    return _reported_landed(store, rejected_metrics, job_id, rejected[0])


def _reported_landed(
    store: Store, table: Any, job_id: str, point: MetricPoint | RejectedMetric
) -> bool:
    c = table.c
    return store._exists(
        table, c.job_id == job_id, c.name == point.name, c.step == point.step, c.time == point.time
    )


class Store:
    """Every operation waits out an unreachable database as `patience` allows (a controller's
    store by default), then raises StoreUnavailableError; opening one does not wait."""

    def __init__(self, url: str, patience: Patience = CONTROLLER_PATIENCE) -> None:
        self.url = url
        self.describe = f"store {safe_url(url)!r}"
        self._engine, self._autocommit = engines_for(url)
        self._set_patience(patience)
        try:
            self._open_schema()
        except SQLAlchemyError as exc:
            self.close()
            cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            if is_transient(exc):  # nothing was changed: the command can be run again
                raise StoreUnavailableError(
                    f"{self.describe} is unreachable: {exc.__class__.__name__}: {cause}"
                ) from None
            raise StoreError(
                f"cannot open store {safe_url(url)!r}: {exc.__class__.__name__}: {cause}"
            ) from None
        except StoreError:
            self.close()
            raise

    def _set_patience(self, patience: Patience) -> None:
        self.patience = patience
        self.attempts = AttemptLog(self._engine, self._autocommit, patience, self.describe)
        self.notices = NoticeLog(self._autocommit, patience, self.describe)
        # Reads over a tuning job's trials; counts and change marks, for pages.
        self.trials = TrialQueries(self._autocommit, patience, self.describe)
        self.browse = BrowseQueries(self._autocommit, patience, self.describe)

    def without_waiting(self) -> Store:
        """This store (its connections shared) whose operations do not wait for an
        unreachable database: for a check that can be asked again later. Not to be closed."""
        hurried = copy.copy(self)
        hurried._set_patience(NO_WAIT)
        return hurried

    def close(self) -> None:
        self._engine.dispose()
        self._autocommit.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- training jobs ---------------------------------------------------------------------

    @patient_once(_job_landed)
    def create_training_job(self, job: NewTrainingJob, metrics: Sequence[MetricPoint] = ()) -> None:
        """A new job (Pending); `metrics`: reports it starts with (inherited with another
        job's checkpoint), written in the same transaction."""
        if metrics:
            with self._engine.begin() as conn:
                self._insert_training_job(conn, job)
                conn.execute(insert(metric_points), _metric_rows(job.id, metrics))
            return
        with self._autocommit.connect() as conn:  # one statement: a transaction by itself
            self._insert_training_job(conn, job)

    def _insert_training_job(self, conn: Connection, job: NewTrainingJob) -> None:
        conn.execute(  # values as parameters: the compiled statement is reused
            insert(training_jobs),
            {
                "id": job.id,
                "name": job.name,
                "algorithm": job.algorithm,
                "status": JobStatus.PENDING.value,
                "spec": job.spec,
                "hyperparameters": job.hyperparameters,
                "instance_count": job.instance_count,
                "created_at": job.created_at,
                "final_metrics": {},
                "log_dir": job.log_dir,
                "stop_requested": False,
                "tuning_job_id": job.tuning_job_id,
                "trial_number": job.trial_number,
            },
        )

    def mark_in_progress(self, job_id: str, start_time: float, pid: int, host: str) -> None:
        self._mark_started(training_jobs, job_id, start_time, pid, host)

    @patient_once(_ending_landed)
    def finish_training_job(
        self, job_id: str, outcome: JobOutcome, metrics: Sequence[MetricPoint] = ()
    ) -> None:
        """Record how a job ended (or paused), with any reports not yet stored, in one
        transaction."""
        if not outcome.status.has_run:
            raise ValueError(f"{outcome.status} is not a final status")
        ending = {
            "row_id": job_id,
            "status": outcome.status.value,
            "start_time": outcome.start_time,
            "end_time": outcome.end_time,
            "wall_seconds": outcome.wall_seconds,
            "billable_seconds": outcome.billable_seconds,
            "billable_by_class": outcome.billable_by_class,
            "final_metrics": outcome.final_metrics,
            "failure_reason": outcome.failure_reason,
            "artifact": outcome.artifact,
            "waiting_since": None,
        }
        if metrics and self._autocommit.dialect.name == "postgresql":
            with self._autocommit.connect() as conn:
                conn.execute(
                    _FINISH_WITH_POINTS_PG,
                    {
                        **ending,
                        "names": [p.name for p in metrics],
                        "steps": [p.step for p in metrics],
                        "point_values": [p.value for p in metrics],
                        "times": [p.time for p in metrics],
                    },
                )
            return
        with self._engine.begin() as conn:
            if metrics:
                conn.execute(insert(metric_points), _metric_rows(job_id, metrics))
            conn.execute(_UPDATE_BY_ID[training_jobs.name], ending)

    @patient
    def abandon_training_job(
        self, job_id: str, status: JobStatus, reason: str, end_time: float
    ) -> None:
        """End a job whose controller is gone; a job that has ended meanwhile is left alone."""
        terminal = [s.value for s in JobStatus if s.is_terminal]
        with self._engine.begin() as conn:
            conn.execute(
                update(training_jobs)
                .where(training_jobs.c.id == job_id, training_jobs.c.status.not_in(terminal))
                .values(status=status.value, end_time=end_time, failure_reason=reason)
            )
            conn.execute(  # and the attempt it left running
                update(job_attempts)
                .where(job_attempts.c.job_id == job_id, job_attempts.c.status.not_in(terminal))
                .values(status=status.value, end_time=end_time, reason=reason)
            )

    @patient_once(_reopen_landed)
    def reopen_training_job(self, job_id: str) -> None:
        """A Stopped, Failed or Paused job becomes Pending again, for a new attempt (`jobs
        resume`, a promotion); one transaction, so two resumes of the same job cannot both go
        ahead."""
        resumable = [JobStatus.STOPPED.value, JobStatus.FAILED.value, JobStatus.PAUSED.value]
        with self._engine.begin() as conn:
            found = conn.execute(
                update(training_jobs)
                .where(training_jobs.c.id == job_id, training_jobs.c.status.in_(resumable))
                .values(
                    status=JobStatus.PENDING.value,
                    stop_requested=False,
                    failure_reason=None,
                    end_time=None,
                )
            )
            if found.rowcount != 1:
                record = self._get(conn, job_id)
                raise InvalidInputError(
                    f"job {job_id!r} is {record.status.value}: only a Stopped, Failed or "
                    "Paused job resumes"
                )

    @patient
    def end_paused_training_job(self, job_id: str, reason: str) -> bool:
        """A Paused trial that will not go on becomes Stopped, its pause's times and billing
        kept; False if it was not Paused."""
        with self._engine.begin() as conn:
            found = conn.execute(
                update(training_jobs)
                .where(
                    training_jobs.c.id == job_id,
                    training_jobs.c.status == JobStatus.PAUSED.value,
                )
                .values(status=JobStatus.STOPPED.value, failure_reason=reason)
            )
        return bool(found.rowcount == 1)

    @patient
    def end_paused_trials(self, tuning_id: str, why: str) -> int:
        """A tuning job's trials still Paused as it ends become Stopped, in one statement
        (`why` is added to each pause's reason); how many."""
        with self._engine.begin() as conn:
            found = conn.execute(
                update(training_jobs)
                .where(
                    training_jobs.c.tuning_job_id == tuning_id,
                    training_jobs.c.status == JobStatus.PAUSED.value,
                )
                .values(
                    status=JobStatus.STOPPED.value,
                    failure_reason=func.coalesce(training_jobs.c.failure_reason, "paused") + why,
                )
            )
        return int(found.rowcount)

    def set_waiting(self, job_id: str, since: float | None) -> None:
        """Mark a job whose workers wait for room (since then), or clear the mark (None)."""
        self._update(training_jobs, job_id, waiting_since=since)

    @patient
    def set_prices(self, prices: Mapping[str, float] | None) -> None:
        """The price of a worker-second on each capacity class, for jobs whose file gives
        none (`scaletune prices`); None forgets them."""
        with self._engine.begin() as conn:
            conn.execute(delete(meta).where(meta.c.key == PRICES_KEY))
            if prices is not None:
                conn.execute(insert(meta).values(key=PRICES_KEY, value=json.dumps(dict(prices))))

    @patient
    def prices(self) -> dict[str, float] | None:
        with self._autocommit.connect() as conn:
            value = conn.execute(
                select(meta.c.value).where(meta.c.key == PRICES_KEY)
            ).scalar_one_or_none()
        return None if value is None else {k: float(v) for k, v in json.loads(value).items()}

    def request_stop(self, job_id: str) -> TrainingJobRecord:
        return self._ask(job_id, stop_requested=True)

    def request_size(self, job_id: str, size: int) -> TrainingJobRecord:
        """Ask an elastic job to train on `size` workers (checked against its range by the
        caller); it resizes at its next checkpoint, and keeps to it while capacity allows."""
        return self._ask(job_id, requested_size=size)

    @patient
    def _ask(self, /, job_id: str, **values: object) -> TrainingJobRecord:
        """Set what a job's controller is asked to do; the job as it is then (an unknown id
        raises JobNotFoundError, and nothing is written)."""
        with self._engine.begin() as conn:
            self._get(conn, job_id)
            conn.execute(update(training_jobs).where(training_jobs.c.id == job_id).values(**values))
            return self._get(conn, job_id)

    @patient
    def requested_size(self, job_id: str) -> int | None:
        with self._autocommit.connect() as conn:
            value = conn.execute(
                select(training_jobs.c.requested_size).where(training_jobs.c.id == job_id)
            ).scalar_one_or_none()
        return None if value is None else int(value)

    @patient
    def is_stop_requested(self, job_id: str) -> bool:
        with self._autocommit.connect() as conn:
            value = conn.execute(
                select(training_jobs.c.stop_requested).where(training_jobs.c.id == job_id)
            ).scalar_one_or_none()
        return bool(value)

    @patient
    def get_training_job(self, job_id: str) -> TrainingJobRecord:
        with self._autocommit.connect() as conn:
            return self._get(conn, job_id)

    @patient
    def list_training_jobs(
        self,
        *,
        status: JobStatus | None = None,
        tuning_job_id: str | None = None,
        algorithm: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[TrainingJobRecord]:
        """Newest first; a page of `limit` from `offset` (indexed: cheap at any size)."""
        query = (
            select(training_jobs)
            .where(*job_filters(status, tuning_job_id, algorithm))
            .order_by(training_jobs.c.created_at.desc(), training_jobs.c.id.desc())
            .offset(offset)
            .limit(limit)
        )
        with self._autocommit.connect() as conn:
            return [_record(row._mapping) for row in conn.execute(query)]

    def set_trial_result(
        self,
        job_id: str,
        objective: float | None,
        resource: int | None,
        *,
        seconds_per_step: float | None = None,
        full_resource: int | None = None,
        bracket: int | None = None,
    ) -> None:
        """A trial's objective so far; its seconds per step, full resource and Hyperband
        bracket where known (a value not given leaves the one recorded)."""
        values: dict[str, object] = {"objective": objective, "resource": resource}
        if bracket is not None:
            values["hyperband_bracket"] = bracket
        if seconds_per_step is not None:
            values["seconds_per_step"] = seconds_per_step
        if full_resource is not None:
            values["full_resource"] = full_resource
        self._update(training_jobs, job_id, **values)

    @patient
    def training_jobs_of(self, tuning_job_id: str) -> list[TrainingJobRecord]:
        query = (
            select(training_jobs)
            .where(training_jobs.c.tuning_job_id == tuning_job_id)
            .order_by(training_jobs.c.trial_number)
        )
        with self._autocommit.connect() as conn:
            return [_record(row._mapping) for row in conn.execute(query)]

    # -- tuning jobs -----------------------------------------------------------------------

    @patient_once(_tuning_job_landed)
    def create_tuning_job(self, job: NewTuningJob) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                insert(tuning_jobs).values(
                    id=job.id,
                    name=job.name,
                    strategy=job.strategy,
                    spec=job.spec,
                    status=JobStatus.PENDING.value,
                    created_at=job.created_at,
                    stop_requested=False,
                )
            )

    def mark_tuning_in_progress(
        self, tuning_id: str, start_time: float, pid: int, host: str
    ) -> None:
        self._mark_started(tuning_jobs, tuning_id, start_time, pid, host)

    def set_tuning_best(self, tuning_id: str, job_id: str, objective: float) -> None:
        self._update(tuning_jobs, tuning_id, best_training_job=job_id, best_objective=objective)

    @patient
    def finish_tuning_job(
        self,
        tuning_id: str,
        status: JobStatus,
        end_time: float,
        wall_seconds: float,
        reason: str | None = None,
        *,
        holder: str | None = None,
        completion_reason: str | None = None,
    ) -> bool:
        """Record how it ended (`reason`: why it failed or was stopped; `completion_reason`:
        why a completed one ended when it did) and free its lease; with `holder`, only if that
        controller still holds it (one that lost it to another writes nothing). Whether it
        was written."""
        if not status.is_terminal:
            raise ValueError(f"{status} is not a final status")
        c = tuning_jobs.c
        query = update(tuning_jobs).where(c.id == tuning_id)
        if holder is not None:
            query = query.where(c.lease_holder == holder)
        with self._autocommit.connect() as conn:
            done = conn.execute(
                query.values(
                    status=status.value,
                    end_time=end_time,
                    wall_seconds=wall_seconds,
                    failure_reason=reason,
                    completion_reason=completion_reason,
                    lease_holder=None,
                    lease_expires=None,
                )
            )
        return bool(done.rowcount == 1)

    @patient
    def take_tuning_lease(
        self,
        tuning_id: str,
        holder: str,
        now: float,
        until: float,
        *,
        from_dead: str | None = None,
    ) -> TuningJobRecord | None:
        """Give `holder` the right to run the tuning job until `until`, unless another
        controller holds it past `now` (`from_dead`: a holder known to be dead, whose lease
        is taken whenever it lives): None when taken, else the job as it is (its holder)."""
        c = tuning_jobs.c
        free = or_(
            c.lease_holder.is_(None),
            c.lease_holder == holder,
            c.lease_expires < now,
            c.lease_holder == from_dead,
        )
        with self._engine.begin() as conn:
            done = conn.execute(
                update(tuning_jobs)
                .where(c.id == tuning_id, free)
                .values(lease_holder=holder, lease_expires=until)
            )
            if done.rowcount == 1:
                return None
            row = conn.execute(select(tuning_jobs).where(c.id == tuning_id)).first()
        if row is None:
            raise JobNotFoundError(tuning_id, kind="tuning job")
        return _tuning_record(row._mapping)

    @patient
    def renew_tuning_lease(self, tuning_id: str, holder: str, until: float) -> bool:
        """Keep the lease until `until`; False if another controller has taken it."""
        c = tuning_jobs.c
        with self._autocommit.connect() as conn:
            done = conn.execute(
                update(tuning_jobs)
                .where(c.id == tuning_id, c.lease_holder == holder)
                .values(lease_expires=until)
            )
        return bool(done.rowcount == 1)

    def request_tuning_stop(self, tuning_id: str) -> TuningJobRecord:
        self.get_tuning_job(tuning_id)
        self._update(tuning_jobs, tuning_id, stop_requested=True)
        return self.get_tuning_job(tuning_id)

    @patient
    def is_tuning_stop_requested(self, tuning_id: str) -> bool:
        with self._autocommit.connect() as conn:
            value = conn.execute(
                select(tuning_jobs.c.stop_requested).where(tuning_jobs.c.id == tuning_id)
            ).scalar_one_or_none()
        return bool(value)

    @patient
    def get_tuning_job(self, tuning_id: str) -> TuningJobRecord:
        with self._autocommit.connect() as conn:
            row = conn.execute(select(tuning_jobs).where(tuning_jobs.c.id == tuning_id)).first()
        if row is None:
            raise JobNotFoundError(tuning_id, kind="tuning job")
        return _tuning_record(row._mapping)

    @patient
    def list_tuning_jobs(
        self, *, limit: int | None = None, offset: int = 0
    ) -> list[TuningJobRecord]:
        query = (
            select(tuning_jobs)
            .order_by(tuning_jobs.c.created_at.desc(), tuning_jobs.c.id.desc())
            .offset(offset)
            .limit(limit)
        )
        with self._autocommit.connect() as conn:
            return [_tuning_record(row._mapping) for row in conn.execute(query)]

    def _mark_started(
        self, table: Any, row_id: str, start_time: float, pid: int, host: str
    ) -> None:
        """InProgress, with the controller that runs it (to tell later whether it died)."""
        self._update(
            table,
            row_id,
            status=JobStatus.IN_PROGRESS.value,
            start_time=start_time,
            controller_pid=pid,
            controller_host=host,
        )

    @patient
    def _update(self, /, table: Any, row_id: str, **values: object) -> None:
        with self._autocommit.connect() as conn:  # one statement: a transaction by itself
            conn.execute(_UPDATE_BY_ID[table.name], {"row_id": row_id, **values})

    # -- metrics ---------------------------------------------------------------------------

    @patient_once(_points_landed)
    def append_metrics(self, job_id: str, points: Sequence[MetricPoint]) -> None:
        if not points:
            return
        with self._engine.begin() as conn:
            conn.execute(insert(metric_points), _metric_rows(job_id, points))

    @patient_once(_rejected_landed)
    def append_rejected(self, job_id: str, rejected: Sequence[RejectedMetric]) -> None:
        if not rejected:
            return
        with self._engine.begin() as conn:
            conn.execute(
                insert(rejected_metrics),
                [
                    {
                        "job_id": job_id,
                        "name": r.name,
                        "step": r.step,
                        "value": r.value,
                        "time": r.time,
                    }
                    for r in rejected
                ],
            )

    @patient
    def discard_metrics_after(self, job_id: str, step: int | None) -> int:
        """Forget what a job reported past `step` (everything, for None): a retry resumed
        from the checkpoint of that step reports those steps again. Returns points removed."""
        removed = 0
        with self._engine.begin() as conn:
            for table in (metric_points, rejected_metrics):
                query = delete(table).where(table.c.job_id == job_id)
                if step is not None:
                    query = query.where(table.c.step > step)
                removed += conn.execute(query).rowcount or 0
        return removed

    @patient
    def rejected(self, job_id: str) -> list[RejectedMetric]:
        query = (
            select(
                rejected_metrics.c.name,
                rejected_metrics.c.step,
                rejected_metrics.c.value,
                rejected_metrics.c.time,
            )
            .where(rejected_metrics.c.job_id == job_id)
            .order_by(rejected_metrics.c.time, rejected_metrics.c.id)
        )
        with self._autocommit.connect() as conn:
            return [RejectedMetric(*row) for row in conn.execute(query)]

    @patient
    def metrics(self, job_id: str, name: str | None = None) -> list[MetricPoint]:
        query, values = (
            (_METRICS_OF_JOB, {"job_id": job_id})
            if name is None
            else (_METRIC_OF_JOB, {"job_id": job_id, "name": name})
        )
        with self._autocommit.connect() as conn:
            return [MetricPoint(*row) for row in conn.execute(query, values)]

    # -- internals -------------------------------------------------------------------------

    def _exists(self, table: Any, *where: Any) -> bool:
        with self._autocommit.connect() as conn:
            return conn.execute(select(table.c[0]).where(*where).limit(1)).first() is not None

    def _get(self, conn: Connection, job_id: str) -> TrainingJobRecord:
        row = conn.execute(_JOB_BY_ID, {"job_id": job_id}).first()
        if row is None:
            raise JobNotFoundError(job_id)
        return _record(row._mapping)

    def _open_schema(self) -> None:
        with self._engine.begin() as conn:
            version = open_schema(conn)
        if version != str(SCHEMA_VERSION):
            raise StoreError(
                f"store {safe_url(self.url)!r} has schema version {version}; this scaletune "
                f"reads version {SCHEMA_VERSION}"
            )


def _metric_rows(job_id: str, points: Sequence[MetricPoint]) -> list[dict[str, Any]]:
    return [
        {"job_id": job_id, "name": p.name, "step": p.step, "value": p.value, "time": p.time}
        for p in points
    ]


def _record(row: Any) -> TrainingJobRecord:
    by_class = row["billable_by_class"]
    return _from_row(
        TrainingJobRecord,
        row,
        final_metrics=dict(row["final_metrics"] or {}),
        billable_by_class=None if by_class is None else dict(by_class),
    )


def _tuning_record(row: Any) -> TuningJobRecord:
    return _from_row(TuningJobRecord, row)


def _from_row(record_type: type[RecordT], row: Any, **overrides: Any) -> RecordT:
    """Records name their fields as the table names its columns."""
    values = {field.name: row[field.name] for field in dataclasses.fields(record_type)}
    values.update(status=JobStatus(row["status"]), stop_requested=bool(row["stop_requested"]))
    return record_type(**{**values, **overrides})
