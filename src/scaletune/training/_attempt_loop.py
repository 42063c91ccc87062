"""A run's attempts: each one recorded, its workers placed and watched to their end; a retry
(as the job's [retry] allows), a resize or a notice starts the next from the newest
checkpoint, at the size that fits."""

from __future__ import annotations

from collections.abc import Callable

from scaletune.checkpoints import Checkpoint
from scaletune.clock import Clock
from scaletune.cluster import Backend
from scaletune.errors import (
    ClusterTooSmallError,
    LaunchAbandonedError,
    StoreUnavailableError,
    WorkerStartError,
)
from scaletune.store import JobStatus, MetricPoint, Store
from scaletune.training._attempt import (
    JobRun,
    RoomWait,
    last_reported_step,
    reported_step,
    resume_point,
    worker_tasks,
)
from scaletune.training._ending import Ending, Fault
from scaletune.training._notices import AttemptNotices, NoticeResponse, Respond
from scaletune.training._prepared import PreparedJob
from scaletune.training._run_end import RunBook
from scaletune.training._sizing import Sizing
from scaletune.training._stopper import Stopper
from scaletune.training._supervise import AttemptState, Timing, supervise


class AttemptLoop:
    def __init__(
        self, store: Store, backend: Backend, clock: Clock, timing: Timing, sizing: Sizing
    ) -> None:
        self._store, self._backend, self._clock = store, backend, clock
        self._timing, self._sizing = timing, sizing

    def run(self, run: JobRun, book: RunBook) -> Ending:
        """Attempts until one ends the job; the last one's Ending (`book.state` is always
        the latest attempt's, for the run's end)."""
        job, writer, state = run.job, run.writer, book.state
        redo_from = job.reached_step if state.number > 1 else None
        retries = 0  # a resumed job has its own retries again
        while True:
            resume = self._begin(job, state, redo_from)
            ending = self._attempt(run, resume, state)
            writer.metrics(state.pending)
            state.pending.clear()
            writer.drain()  # what comes next reads them
            if ending.resize_to is None and not _retryable(job, ending, run.stop):
                return ending
            run.live.end(completed=False)  # a resize's workers finished: they go back warm
            following = self._following(job, ending, state.size, retries)
            if following is None:
                return ending
            size, counted = following
            retries += counted
            self._store.attempts.end(
                job.id,
                state.number,
                status=ending.status,
                end_time=self._clock.time(),
                reason=ending.reason,
                retried=True,
            )
            book.billing.add(job.spec.capacity_of(state.size), self._clock.monotonic())
            # How far the work went: this attempt's reports, else those of the one before.
            redo_from = state.last_step if state.last_step is not None else redo_from
            state = AttemptState(state.number + 1, size, final_metrics=state.final_metrics)
            book.state = state

    def _begin(
        self, job: PreparedJob, state: AttemptState, redo_from: int | None
    ) -> Checkpoint | None:
        """Record the attempt; a later one starts from the newest whole checkpoint, and
        what was reported past it is forgotten (those steps are reported again)."""
        store, folder = self._store, job.checkpoints
        resume = job.starts_from if state.number == 1 else None
        if folder is not None and state.number > 1:
            resume = resume_point(folder, last_reported_step(store, job.id))
        reported = None if resume is None else reported_step(resume)
        if state.number > 1:
            store.discard_metrics_after(job.id, reported)
        if state.number > 1 or resume is not None:  # the reports it goes on from
            state.final_metrics = _last_values(store.metrics(job.id))
        redone = None if redo_from is None else max(redo_from - (reported or 0), 0)
        store.attempts.start(
            job.id,
            state.number,
            self._clock.time(),
            resumed_from_step=None if resume is None else resume.step,
            steps_redone=redone,
        )
        return resume

    def _attempt(self, run: JobRun, resume: Checkpoint | None, state: AttemptState) -> Ending:
        """Place the workers, watch them to the end; what breaks becomes the attempt's Ending."""
        job, live, stop = run.job, run.live, run.stop
        placeable = (lambda: self._sizing.placeable(job)) if job.spec.elastic else None
        wait = RoomWait(self._store, self._clock, job, stop, run.started, state.size, placeable)
        while live.group is None:
            try:
                tasks, live.rendezvous = worker_tasks(
                    job,
                    run.staging,
                    run.shards,
                    resume,
                    state.number,
                    self._backend.rendezvous_host,
                    state.size,
                )
                live.group = self._backend.launch(tasks, job.spec.cluster, abandon=wait)
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
            self._store.set_waiting(job.id, None)  # placed at last
        self._store.attempts.set_workers(job.id, state.number, live.group.locations)
        if run.on_started is not None:
            run.on_started(live.group)
        notices = AttemptNotices(
            self._store,
            job.id,
            state.number,
            job.spec.cluster.notice_seconds,
            self._clock,
            self._notice_response(run, state.size),
        )
        return supervise(
            run,
            live.group,
            state,
            asked_to_stop=self._asked_to_stop(job.id),
            clock=self._clock,
            timing=self._timing,
            resize=self._sizing.resize_check(job, state.size) if job.spec.elastic else None,
            notices=notices,
        )

    def _notice_response(self, run: JobRun, size: int) -> Respond:
        hurried = self._store.without_waiting()
        return NoticeResponse(
            run.job.spec,
            size,
            in_tuning_job=run.in_tuning_job,
            placeable=lambda staying: self._sizing.placeable(run.job, held=staying, store=hurried),
        )

    def _following(
        self, job: PreparedJob, ending: Ending, size: int, retries: int
    ) -> tuple[int, bool] | None:
        """The next attempt's size, and whether it counts as a retry (`retries` made so
        far); None: no next attempt. An elastic job that lost workers the capacity no longer
        has goes on with fewer, which is not a retry; the same size again is one."""
        if ending.resize_to is not None:
            return ending.resize_to, False
        fits = self._sizing.placeable(job)  # asked once the attempt's workers are gone
        if job.spec.elastic and fits < size:
            return fits, False
        if retries >= job.spec.retry.max_attempts:  # it counts retries, not attempts
            return None
        return fits, True

    def _asked_to_stop(self, job_id: str) -> Callable[[], bool]:
        """Whether `jobs stop` asked, read without waiting: while the store is away, the
        workers train on and the next check asks again."""
        hurried = self._store.without_waiting()

        def asked() -> bool:
            try:
                return hurried.is_stop_requested(job_id)
            except StoreUnavailableError:
                return False

        return asked


def _retryable(job: PreparedJob, ending: Ending, stop: Stopper) -> bool:
    """Whether the job's retry policy mends this ending at all."""
    if ending.status is not JobStatus.FAILED or stop.is_set():
        return False
    return ending.fault is Fault.INFRASTRUCTURE or (
        ending.fault is Fault.PROGRAM and job.spec.retry.retry_on_program_error
    )


def _last_values(points: list[MetricPoint]) -> dict[str, float]:
    """Each metric's value at its highest step (points come ordered by name, then step)."""
    return {point.name: point.value for point in points}
