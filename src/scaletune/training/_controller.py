"""A training job's life: check data, place workers, stream reports, finish, account.

The controller is the face of its parts: preparing a job (`_preparing`), sizing it
(`_sizing`), the attempts of a run (`_attempt_loop`, each watched by `_supervise`) and the
run's end (`_run_end`)."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from scaletune.checkpoints import CheckpointFolder
from scaletune.clock import Clock, SystemClock
from scaletune.cluster import Backend, Group
from scaletune.spec import CapacityPlan, TrainingJobSpec
from scaletune.store import JobStatus, Store, TrainingJobRecord
from scaletune.tracking import TrackedJob, Trackers, Tracking
from scaletune.training._attempt import (
    JobRun,
    LiveAttempt,
    last_reported_step,
    reports_stored,
    write_shards,
)
from scaletune.training._attempt_loop import AttemptLoop
from scaletune.training._billing import Billing, billed_before
from scaletune.training._ending import Ending
from scaletune.training._paths import SCRATCH_PREFIX, JobPaths
from scaletune.training._prepared import PreparedJob
from scaletune.training._preparing import JobPreparer
from scaletune.training._report_writer import ReportWriter
from scaletune.training._run_end import RunBook, end_run
from scaletune.training._sizing import Sizing
from scaletune.training._staging import JobStaging
from scaletune.training._stopper import Stopper
from scaletune.training._supervise import AttemptState, Timing
from scaletune.worker import Report


class TrainingController:
    """Runs training jobs on a backend and records everything in the store."""

    def __init__(
        self,
        store: Store,
        backend: Backend,
        jobs_dir: Path,
        *,
        clock: Clock | None = None,
        poll_seconds: float = 0.05,
        stop_check_seconds: float = 0.5,
        metrics_flush_seconds: float = 0.5,
        stop_grace_seconds: float = 5.0,
        report_gather_seconds: float = 0.02,
        tracking: Tracking | None = None,
    ) -> None:
        self.store = store
        self.backend = backend
        self.jobs_dir = jobs_dir
        self.clock = clock or SystemClock()
        self.timing = Timing(
            poll_seconds=poll_seconds,
            stop_check_seconds=stop_check_seconds,
            # Batched so the controller costs the workers little CPU; flushed at the end.
            metrics_flush_seconds=metrics_flush_seconds,
            stop_grace_seconds=stop_grace_seconds,  # then workers are killed
            gather_seconds=report_gather_seconds,  # at most 50 looks a second while streaming
        )
        self.tracking = tracking or Tracking(jobs_dir)  # MLflow, TensorBoard
        self._preparer = JobPreparer(
            store, backend.name, jobs_dir, self.clock, self.tracking, warm_up=backend.warm_up
        )
        self._sizing = Sizing(store, backend)
        self._attempts = AttemptLoop(store, backend, self.clock, self.timing, self._sizing)

    def close(self) -> None:
        """Send what trackers still hold (for a while, if their server is down)."""
        self.tracking.close()

    def prepare(
        self,
        spec: TrainingJobSpec,
        *,
        job_id: str | None = None,
        tuning_job_id: str | None = None,
        trial_number: int | None = None,
    ) -> PreparedJob:
        """Load and check every input; only then write the job (Pending) to the store."""
        return self._preparer.prepare(
            spec, job_id=job_id, tuning_job_id=tuning_job_id, trial_number=trial_number
        )

    def prepare_resume(self, job_id: str, *, capacity: CapacityPlan | None = None) -> PreparedJob:
        """A Stopped, Failed or Paused job, ready to run again from its latest checkpoint (a
        new attempt under the same id), on `capacity` if given (a trial promoted off spot).
        Its inputs are loaded and checked again."""
        return self._preparer.prepare_resume(job_id, capacity=capacity)

    def run(
        self,
        job: PreparedJob,
        stop: Stopper | None = None,
        on_started: Callable[[Group], None] | None = None,
        on_report: Callable[[Report], None] | None = None,
    ) -> TrainingJobRecord:
        """Run to the end, retrying from the latest checkpoint when workers break (as the
        job's [retry] says). Ctrl-C stops the job (status Stopped), then re-raises.

        A job that ran before (`jobs resume`) continues from its latest checkpoint as a new
        attempt; its earlier time stays in its billing. `on_started` gets each attempt's
        worker group once placed; `on_report` each report (progress).
        """
        earlier = self.store.get_training_job(job.id)
        start_time = earlier.start_time if earlier.start_time is not None else self.clock.time()
        started = self.clock.monotonic()
        self.store.mark_in_progress(job.id, start_time, os.getpid(), socket.gethostname())
        first = AttemptState(len(self.store.attempts.of(job.id)) + 1, self._sizing.placeable(job))
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{job.id}-"))
        book = RunBook(
            job,
            stop or Stopper(),
            start_time,
            started,
            earlier.wall_seconds or 0.0,
            Billing(billed_before(job.spec, earlier), started),
            # Its thread is closed by the run's end: made after all that can fail before it.
            ReportWriter(self.store, job.id, job.paths.unsent_reports),
            LiveAttempt(),
            scratch,
            first,
        )
        interrupted = False
        try:
            ending = self._attempts.run(self._staged(book, earlier, on_started, on_report), book)
        except KeyboardInterrupt:
            interrupted = True
            ending = Ending(JobStatus.STOPPED, "interrupted (Ctrl-C)")
        except Exception as exc:
            ending = Ending(JobStatus.FAILED, f"controller error: {type(exc).__name__}: {exc}")
        end_run(self.store, self.clock, book, ending)
        if interrupted:
            raise KeyboardInterrupt
        return self.store.get_training_job(job.id)

    def _staged(
        self,
        book: RunBook,
        earlier: TrainingJobRecord,
        on_started: Callable[[Group], None] | None,
        on_report: Callable[[Report], None] | None,
    ) -> JobRun:
        """What the run's attempts share: its trackers, and its channels staged once."""
        job = book.job
        reported = on_report or _ignore
        book.tracker = self._tracker(job, earlier, book.start_time)
        if book.tracker:
            reported = _tracked(book.tracker, reported)
        book.staging = JobStaging.create(job.spec.cluster.staging, job.id, book.scratch)
        return JobRun(
            job,
            book.staging,
            write_shards(job, book.staging),
            book.stop,
            book.started,
            book.live,
            book.writer,
            on_started,
            reported,
            in_tuning_job=earlier.tuning_job_id is not None,
        )

    def _tracker(self, job: PreparedJob, record: TrainingJobRecord, start_time: float) -> Trackers:
        return self.tracking.job(
            job.spec.tracking,
            TrackedJob(
                job.id,
                job.spec.name,
                job.spec.algorithm,
                record.hyperparameters,
                job.spec.instance_count,
                self.backend.name.value,
                start_time,
                record.tuning_job_id,
                record.trial_number,
                earlier_metrics=self.store.metrics(job.id)
                if self.tracking.tracks(job.spec.tracking)
                else (),
                new=record.start_time is None,
            ),
        )

    def has_checkpoint(self, job_id: str) -> bool:
        """Whether the job has a complete checkpoint (that another job could start from)."""
        record = self.store.get_training_job(job_id)
        try:
            spec = TrainingJobSpec.model_validate(record.spec)
        except ValidationError:
            return False
        if not spec.checkpoint.enabled:
            return False
        paths = JobPaths.for_job(self.jobs_dir, job_id, spec)
        stored_up_to = last_reported_step(self.store, job_id)
        return any(
            reports_stored(checkpoint, stored_up_to)
            for checkpoint in CheckpointFolder(paths.checkpoints).complete()
        )


def _ignore(report: Report) -> None:
    pass


def _tracked(tracker: Trackers, then: Callable[[Report], None]) -> Callable[[Report], None]:
    def report(event: Report) -> None:
        tracker.report(event.step, event.metrics, event.time)
        then(event)

    return report
