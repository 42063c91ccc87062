"""A training job's life: check data, place workers, stream reports, finish, account.

Past 400 lines: one job's life in one place (prepare, resume, and the run with its attempts,
retries and resizes, which share the run's state); the attempt's watch (`_supervise`), the
wait for room (`_attempt`), the writer of its reports (`_report_writer`), its folders
(`_paths`) and staging (`_staging`) live apart."""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from scaletune.algorithms import Algorithm, PreparedData, get_algorithm
from scaletune.checkpoints import Checkpoint, CheckpointFolder
from scaletune.clock import Clock, SystemClock
from scaletune.cluster import Backend, Group
from scaletune.data import PreparedDatasets, load_channels
from scaletune.errors import (
    ClusterTooSmallError,
    InvalidInputError,
    LaunchAbandonedError,
    StoreUnavailableError,
    WorkerStartError,
)
from scaletune.spec import (
    CapacityPlan,
    TrainingJobSpec,
    describe_validation_error,
)
from scaletune.store import (
    JobOutcome,
    JobStatus,
    MetricPoint,
    NewTrainingJob,
    Store,
    TrainingJobRecord,
)
from scaletune.tracking import JobEnd, TrackedJob, Trackers, Tracking
from scaletune.training._attempt import (
    JobRun,
    LiveAttempt,
    RoomWait,
    reported_step,
    reports_stored,
    resume_point,
    worker_tasks,
    write_shards,
)
from scaletune.training._billing import Billing, billed_before
from scaletune.training._ending import Ending, Fault, ResizeCheck, Resizing
from scaletune.training._ids import new_job_id
from scaletune.training._inherit import copy_checkpoint, read_inheritance
from scaletune.training._notices import AttemptNotices, NoticeResponse, Respond
from scaletune.training._paths import SCRATCH_PREFIX, JobPaths
from scaletune.training._prepared import PreparedJob
from scaletune.training._report_writer import ReportWriter, replay
from scaletune.training._staging import JobStaging, check_writable
from scaletune.training._stopper import Stopper
from scaletune.training._supervise import AttemptState, Timing, supervise
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
        self.datasets = PreparedDatasets()  # built-in datasets, prepared once for all jobs
        self.tracking = tracking or Tracking(jobs_dir)  # MLflow, TensorBoard

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
        if spec.cluster.backend is not self.backend.name:
            raise InvalidInputError(
                f"cluster.backend={spec.cluster.backend.value!r}, but this session places "
                f"workers with the {self.backend.name.value!r} backend (CLI: --backend "
                f"{spec.cluster.backend.value}; Python: Session(backend=...))"
            )
        algorithm, hyperparameters, data = self._inputs(spec)
        check_writable(spec.cluster.staging, "cluster.staging")
        if spec.checkpoint.enabled:
            check_writable(spec.checkpoint.path, "checkpoint.path")
        start_from = spec.checkpoint.start_from
        inheritance = (
            None
            if start_from is None
            else read_inheritance(self.store, self.jobs_dir, spec, algorithm, start_from)
        )
        now = self.clock.time()
        job_id = job_id or new_job_id(spec.name or spec.algorithm, now)
        paths = JobPaths.for_job(self.jobs_dir, job_id, spec)
        checkpoints = _checkpoints(spec, paths)
        inherited = None
        if inheritance is not None:
            assert checkpoints is not None  # start_from needs checkpoints enabled
            inherited = copy_checkpoint(inheritance, checkpoints)
            spec = inheritance.recorded_in(spec)  # the step it took, if it took the newest
        self.store.create_training_job(
            new_job_record(
                spec,
                job_id,
                created_at=now,
                log_dir=str(paths.logs),
                tuning_job_id=tuning_job_id,
                trial_number=trial_number,
            ),
            [] if inheritance is None else inheritance.metrics,
        )
        return PreparedJob(
            job_id,
            spec,
            algorithm,
            hyperparameters,
            data,
            paths,
            checkpoints,
            starts_from=inherited,
        )

    def _inputs(self, spec: TrainingJobSpec) -> tuple[Algorithm, BaseModel, PreparedData]:
        """What a new job and a resumed one both check and load before anything is written:
        its tracking, its algorithm's checks (a trial's spec is built, not loaded, so they
        run here too), its data prepared, and its hyperparameters as the data completed them."""
        self.tracking.check(spec.tracking)
        algorithm = get_algorithm(spec.algorithm)
        algorithm.check_inputs(spec)
        hyperparameters = algorithm.parse_hyperparameters(spec.hyperparameters)
        algorithm.check_job(spec, hyperparameters)
        data = algorithm.prepare_data(hyperparameters, load_channels(spec, self.datasets))
        return algorithm, data.hyperparameters or hyperparameters, data

    def prepare_resume(self, job_id: str, *, capacity: CapacityPlan | None = None) -> PreparedJob:
        """A Stopped, Failed or Paused job, ready to run again from its latest checkpoint (a
        new attempt under the same id), on `capacity` if given (a trial promoted off spot).
        Its inputs are loaded and checked again."""
        record = self.store.get_training_job(job_id)
        if record.status not in (JobStatus.STOPPED, JobStatus.FAILED, JobStatus.PAUSED):
            raise InvalidInputError(
                f"job {job_id!r} is {record.status.value}: only a Stopped, Failed or Paused "
                "job resumes"
            )
        try:
            spec = TrainingJobSpec.model_validate(record.spec)
        except ValidationError as exc:  # its data moved since, say
            raise InvalidInputError(
                f"job {job_id!r} cannot resume: {describe_validation_error(exc)}"
            ) from None
        if capacity is not None:
            spec = spec.model_copy(
                update={"cluster": spec.cluster.model_copy(update={"capacity": capacity})}
            )
        if spec.cluster.backend is not self.backend.name:
            raise InvalidInputError(
                f"job {job_id!r} ran on the {spec.cluster.backend.value!r} backend; resume it "
                f"with --backend {spec.cluster.backend.value}"
            )
        algorithm, hyperparameters, data = self._inputs(spec)
        paths = JobPaths.for_job(self.jobs_dir, job_id, spec)
        job = PreparedJob(
            job_id,
            spec,
            algorithm,
            hyperparameters,
            data,
            paths,
            _checkpoints(spec, paths),
        )
        self.store.reopen_training_job(job_id)  # last: nothing changes if a check failed
        replay(self.store, job_id, paths.unsent_reports)  # what an outage left unwritten
        # Now, not when it starts: a tuning job rebuilds its scheduler from these reports.
        reached = self._last_step(job_id)
        resume = None if job.checkpoints is None else resume_point(job.checkpoints, reached)
        self.store.discard_metrics_after(job_id, None if resume is None else reported_step(resume))
        return dataclasses.replace(job, reached_step=reached, starts_from=resume)

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
        stop = stop or Stopper()
        earlier = self.store.get_training_job(job.id)
        earlier_wall = earlier.wall_seconds or 0.0
        start_time = earlier.start_time if earlier.start_time is not None else self.clock.time()
        started = self.clock.monotonic()
        self.store.mark_in_progress(job.id, start_time, os.getpid(), socket.gethostname())
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{job.id}-"))
        staging: JobStaging | None = None
        size = self._placeable(job)
        state = AttemptState(len(self.store.attempts.of(job.id)) + 1, size)
        billing = Billing(billed_before(job.spec, earlier), started)
        live = LiveAttempt()
        writer = ReportWriter(self.store, job.id, job.paths.unsent_reports)
        interrupted = False
        tracker = Trackers([])
        reported = on_report or _ignore
        try:
            tracker = self._tracker(job, earlier, start_time)
            if tracker:
                reported = _tracked(tracker, reported)
            staging = JobStaging.create(job.spec.cluster.staging, job.id, scratch)
            shards = write_shards(job, staging)
            run = JobRun(
                job,
                staging,
                shards,
                stop,
                started,
                live,
                writer,
                on_started,
                reported,
                in_tuning_job=earlier.tuning_job_id is not None,
            )
            redo_from = job.reached_step if state.number > 1 else None
            retries = 0  # a resumed job has its own retries again
            while True:
                resume = self._begin_attempt(job, state, redo_from)
                ending = self._attempt(run, resume, state)
                writer.metrics(state.pending)
                state.pending.clear()
                writer.drain()  # what comes next reads them
                if ending.resize_to is None and not self._retryable(job, ending, stop):
                    break
                live.end(completed=False)  # a resize's workers finished: they go back warm
                following = self._following(job, ending, state.size, retries)
                if following is None:
                    break
                size, counted = following
                retries += counted
                self.store.attempts.end(
                    job.id,
                    state.number,
                    status=ending.status,
                    end_time=self.clock.time(),
                    reason=ending.reason,
                    retried=True,
                )
                billing.add(job.spec.capacity_of(state.size), self.clock.monotonic())
                # How far the work went: this attempt's reports, else those of the one before.
                redo_from = state.last_step if state.last_step is not None else redo_from
                state = AttemptState(state.number + 1, size, final_metrics=state.final_metrics)
        except KeyboardInterrupt:
            interrupted = True
            ending = Ending(JobStatus.STOPPED, "interrupted (Ctrl-C)")
        except Exception as exc:
            ending = Ending(JobStatus.FAILED, f"controller error: {type(exc).__name__}: {exc}")
        artifact = None
        try:
            # Every worker finished its task (it completed, or stopped when asked): the
            # workers go back to the pool and the model is published. Otherwise they die.
            clean = live.end(completed=ending.status is JobStatus.COMPLETED)
            if clean and ending.status is not JobStatus.FAILED:
                try:
                    assert staging is not None  # a group was placed, so staging was made
                    artifact = str(self._publish(job, staging.fetch_model()))
                except (OSError, InvalidInputError) as exc:
                    ending = Ending(JobStatus.FAILED, f"could not publish the model: {exc}")
        finally:
            if staging is not None:
                staging.remove()
            shutil.rmtree(scratch, ignore_errors=True)
            now, ended = self.clock.time(), self.clock.monotonic()
            wall = earlier_wall + ended - started
            billable = billing.add(job.spec.capacity_of(state.size), ended)
            writer.metrics(state.pending)
            try:  # a store away longer than its patience raises here, its reports kept
                ending = _drained(writer, ending)
                self.store.attempts.end(
                    job.id, state.number, status=ending.status, end_time=now, reason=ending.reason
                )
                self.store.finish_training_job(
                    job.id,
                    JobOutcome(
                        status=ending.status,
                        start_time=start_time,
                        end_time=now,
                        wall_seconds=wall,
                        billable_seconds=billable,
                        final_metrics=state.final_metrics,
                        failure_reason=ending.reason,
                        artifact=artifact,
                        billable_by_class=billing.by_class,
                    ),
                )
            finally:
                writer.close()
            tracker.finish(
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
        if interrupted:
            raise KeyboardInterrupt
        return self.store.get_training_job(job.id)

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

    def _begin_attempt(
        self, job: PreparedJob, state: AttemptState, redo_from: int | None
    ) -> Checkpoint | None:
        """Record the attempt; a later one starts from the newest whole checkpoint, and
        what was reported past it is forgotten (those steps are reported again)."""
        folder = job.checkpoints
        resume = job.starts_from if state.number == 1 else None
        if folder is not None and state.number > 1:
            resume = resume_point(folder, self._last_step(job.id))
        reported = None if resume is None else reported_step(resume)
        if state.number > 1:
            self.store.discard_metrics_after(job.id, reported)
        if state.number > 1 or resume is not None:  # the reports it goes on from
            state.final_metrics = _last_values(self.store.metrics(job.id))
        redone = None if redo_from is None else max(redo_from - (reported or 0), 0)
        self.store.attempts.start(
            job.id,
            state.number,
            self.clock.time(),
            resumed_from_step=None if resume is None else resume.step,
            steps_redone=redone,
        )
        return resume

    def _attempt(self, run: JobRun, resume: Checkpoint | None, state: AttemptState) -> Ending:
        """Place the workers, watch them to the end; what breaks becomes the attempt's Ending."""
        job, live, stop = run.job, run.live, run.stop
        placeable = (lambda: self._placeable(job)) if job.spec.elastic else None
        wait = RoomWait(self.store, self.clock, job, stop, run.started, state.size, placeable)
        while live.group is None:
            try:
                tasks, live.rendezvous = worker_tasks(
                    job,
                    run.staging,
                    run.shards,
                    resume,
                    state.number,
                    self.backend.rendezvous_host,
                    state.size,
                )
                live.group = self.backend.launch(tasks, job.spec.cluster, abandon=wait)
            except LaunchAbandonedError as exc:  # stopped while waiting for room
                if wait.resize_to is not None:  # room went meanwhile: the same attempt, smaller
                    live.end(completed=False)
                    state.size = wait.shrink()
                    continue
                if wait.timed_out:  # waiting longer would not help: no retry either
                    return Ending(JobStatus.FAILED, str(exc), Fault.CONFIGURATION)
                return Ending(stop.status if stop.is_set() else JobStatus.STOPPED, str(exc))
            except ClusterTooSmallError as exc:  # no retry would fit either
                return Ending(JobStatus.FAILED, str(exc), Fault.CONFIGURATION)
            except (WorkerStartError, OSError) as exc:  # a worker or a port that did not start
                return Ending(
                    JobStatus.FAILED, f"workers did not start: {exc}", Fault.INFRASTRUCTURE
                )
        if wait.waited:
            self.store.set_waiting(job.id, None)  # placed at last
        self.store.attempts.set_workers(job.id, state.number, live.group.locations)
        if run.on_started is not None:
            run.on_started(live.group)
        notices = AttemptNotices(
            self.store,
            job.id,
            state.number,
            job.spec.cluster.notice_seconds,
            self.clock,
            self._notice_response(run, state.size),
        )
        return supervise(
            run,
            live.group,
            state,
            asked_to_stop=self._asked_to_stop(job.id),
            clock=self.clock,
            timing=self.timing,
            resize=self._resize_check(job, state.size) if job.spec.elastic else None,
            notices=notices,
        )

    def _notice_response(self, run: JobRun, size: int) -> Respond:
        hurried = self.store.without_waiting()
        return NoticeResponse(
            run.job.spec,
            size,
            in_tuning_job=run.in_tuning_job,
            placeable=lambda staying: self._placeable(run.job, held=staying, store=hurried),
        )

    def _retryable(self, job: PreparedJob, ending: Ending, stop: Stopper) -> bool:
        """Whether the job's retry policy mends this ending at all."""
        if ending.status is not JobStatus.FAILED or stop.is_set():
            return False
        return ending.fault is Fault.INFRASTRUCTURE or (
            ending.fault is Fault.PROGRAM and job.spec.retry.retry_on_program_error
        )

    def _following(
        self, job: PreparedJob, ending: Ending, size: int, retries: int
    ) -> tuple[int, bool] | None:
        """The next attempt's size, and whether it counts as a retry (`retries` made so
        far); None: no next attempt. An elastic job that lost workers the capacity no longer
        has goes on with fewer, which is not a retry; the same size again is one."""
        if ending.resize_to is not None:
            return ending.resize_to, False
        fits = self._placeable(job)  # asked once the attempt's workers are gone
        if job.spec.elastic and fits < size:
            return fits, False
        if retries >= job.spec.retry.max_attempts:  # it counts retries, not attempts
            return None
        return fits, True

    def _placeable(self, job: PreparedJob, held: int = 0, store: Store | None = None) -> int:
        """The size to train at: a fixed job's; an elastic job's as asked (`jobs resize`,
        else its most) as far as the capacity free beside its `held` workers allows, never
        below its fewest (placing those waits for room)."""
        spec = job.spec
        if not spec.elastic:
            return spec.instance_count
        asked = (store or self.store).requested_size(job.id) or spec.instance_count
        free = self.backend.capacity(spec.cluster)
        if spec.cluster.capacity is CapacityPlan.MIXED and self.backend.spot_room_apart:
            # Its fewest are on-demand; the capacity counted is spot room, for the rest.
            held = max(held, spec.min_workers)
        fits = asked if free is None else min(asked, held + free)
        return max(fits, spec.min_workers)

    def _asked_to_stop(self, job_id: str) -> Callable[[], bool]:
        """Whether `jobs stop` asked, read without waiting: while the store is away, the
        workers train on and the next check asks again."""
        hurried = self.store.without_waiting()

        def asked() -> bool:
            try:
                return hurried.is_stop_requested(job_id)
            except StoreUnavailableError:
                return False

        return asked

    def _resize_check(self, job: PreparedJob, size: int) -> ResizeCheck:
        hurried = self.store.without_waiting()

        def check() -> Resizing | None:
            try:
                wanted = self._placeable(job, held=size, store=hurried)
            except StoreUnavailableError:  # asked again at the next check
                return None
            if wanted == size:
                return None
            if wanted > size:
                return Resizing(wanted, f"resized to {wanted} workers: room for more")
            return Resizing(wanted, f"resized to {wanted} workers: asked for (jobs resize)")

        return check

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
        stored_up_to = self._last_step(job_id)
        return any(
            reports_stored(checkpoint, stored_up_to)
            for checkpoint in CheckpointFolder(paths.checkpoints).complete()
        )

    def _last_step(self, job_id: str) -> int | None:
        return max((point.step for point in self.store.metrics(job_id)), default=None)

    def _publish(self, job: PreparedJob, staged: Path) -> Path:
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


def new_job_record(
    spec: TrainingJobSpec,
    job_id: str,
    *,
    created_at: float,
    log_dir: str,
    tuning_job_id: str | None = None,
    trial_number: int | None = None,
) -> NewTrainingJob:
    """The record a job starts with (Pending), as the store keeps it."""
    return NewTrainingJob(
        id=job_id,
        name=spec.name,
        algorithm=spec.algorithm,
        spec=spec.model_dump(mode="json"),
        hyperparameters=dict(spec.hyperparameters),
        instance_count=spec.instance_count,
        created_at=created_at,
        log_dir=log_dir,
        tuning_job_id=tuning_job_id,
        trial_number=trial_number,
    )


def _ignore(report: Report) -> None:
    pass


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


def _tracked(tracker: Trackers, then: Callable[[Report], None]) -> Callable[[Report], None]:
    def report(event: Report) -> None:
        tracker.report(event.step, event.metrics, event.time)
        then(event)

    return report


def _checkpoints(spec: TrainingJobSpec, paths: JobPaths) -> CheckpointFolder | None:
    if not spec.checkpoint.enabled:
        return None
    return CheckpointFolder(paths.checkpoints)


def _last_values(points: list[MetricPoint]) -> dict[str, float]:
    """Each metric's value at its highest step (points come ordered by name, then step)."""
    return {point.name: point.value for point in points}
