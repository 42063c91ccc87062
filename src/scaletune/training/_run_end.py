"""How one run of a job ends, however it ends: its workers released (or killed), its model
published, its folders removed, its time and billing recorded with its ending, and its
trackers told."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from scaletune.clock import Clock
from scaletune.errors import InvalidInputError, StoreUnavailableError
from scaletune.store import JobOutcome, JobStatus, Store
from scaletune.tracking import JobEnd, Trackers
from scaletune.training._attempt import LiveAttempt
from scaletune.training._billing import Billing
from scaletune.training._ending import Ending
from scaletune.training._prepared import PreparedJob
from scaletune.training._report_writer import ReportWriter
from scaletune.training._staging import JobStaging
from scaletune.training._stopper import Stopper
from scaletune.training._supervise import AttemptState


@dataclass
class RunBook:
    """What one run of a job keeps for its end, its latest attempt's state included."""

    job: PreparedJob
    stop: Stopper
    start_time: float  # the job's first start (wall clock): a resumed job keeps its own
    started: float  # this run's start (monotonic)
    earlier_wall: float  # the wall seconds of the job's runs before this one
    billing: Billing
    writer: ReportWriter
    live: LiveAttempt
    scratch: Path  # the controller's temp folder for the run
    state: AttemptState  # the latest attempt's
    tracker: Trackers = field(default_factory=lambda: Trackers([]))
    staging: JobStaging | None = None  # once made


def end_run(store: Store, clock: Clock, book: RunBook, ending: Ending) -> None:
    """Every worker finished its task (it completed, or stopped when asked): the workers go
    back to the pool and the model is published. Otherwise they die. Then the record."""
    job, state = book.job, book.state
    artifact = None
    try:
        clean = book.live.end(completed=ending.status is JobStatus.COMPLETED)
        if clean and ending.status is not JobStatus.FAILED:
            try:
                assert book.staging is not None  # a group was placed, so staging was made
                artifact = str(publish_model(job, book.staging.fetch_model()))
            except (OSError, InvalidInputError) as exc:
                ending = Ending(JobStatus.FAILED, f"could not publish the model: {exc}")
    finally:
        if book.staging is not None:
            book.staging.remove()
        shutil.rmtree(book.scratch, ignore_errors=True)
        now, ended = clock.time(), clock.monotonic()
        wall = book.earlier_wall + ended - book.started
        billable = book.billing.add(job.spec.capacity_of(state.size), ended)
        book.writer.metrics(state.pending)
        try:  # a store away longer than its patience raises here, its reports kept
            ending = _drained(book.writer, ending)
            store.attempts.end(
                job.id, state.number, status=ending.status, end_time=now, reason=ending.reason
            )
            store.finish_training_job(
                job.id,
                JobOutcome(
                    status=ending.status,
                    start_time=book.start_time,
                    end_time=now,
                    wall_seconds=wall,
                    billable_seconds=billable,
                    final_metrics=state.final_metrics,
                    failure_reason=ending.reason,
                    artifact=artifact,
                    billable_by_class=book.billing.by_class,
                ),
            )
        finally:
            book.writer.close()
    stop = book.stop
    book.tracker.finish(
        JobEnd(
            ending.status,
            end_time=now,
            wall_seconds=wall,
            billable_seconds=billable,
            attempts=state.number,
            final_metrics=state.final_metrics,
            failure_reason=ending.reason,
            model=None if artifact is None else Path(artifact),
            stopped_early=ending.status is JobStatus.STOPPED
            and stop.early
            and ending.reason == stop.reason,
        )
    )


def publish_model(job: PreparedJob, staged: Path) -> Path:
    """Move the model into place in one step, so no half-written artefact is ever seen."""
    for name, content in job.data.artifact_files.items():
        (staged / name).write_bytes(content)
    target = job.paths.artifact
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(staged, partial)
    if target.exists():  # a resumed job's earlier model (stopped at a step) gives way
        earlier = target.with_name(f".{target.name}.replaced")
        shutil.rmtree(earlier, ignore_errors=True)
        target.rename(earlier)
        partial.rename(target)
        shutil.rmtree(earlier, ignore_errors=True)
    else:
        partial.rename(target)
    return target


def _drained(writer: ReportWriter, ending: Ending) -> Ending:
    """The ending once every report is in the store: a report the store refused (not one
    it could not take for being away) fails the job, saying so."""
    try:
        writer.drain()
    except StoreUnavailableError:
        raise
    except Exception as exc:
        if ending.status is not JobStatus.FAILED:
            return Ending(JobStatus.FAILED, f"controller error: {type(exc).__name__}: {exc}")
    return ending
