"""A training job's life: check data, place workers, stream reports, finish, account."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from scaletune.algorithms import Algorithm, PreparedData, get_algorithm
from scaletune.clock import Clock, SystemClock
from scaletune.cluster import Backend, Group, GroupRendezvous
from scaletune.data import PreparedDatasets, TableFiles, load_channels
from scaletune.errors import InvalidInputError, LaunchAbandonedError
from scaletune.spec import ShardingMode, TrainingJobSpec
from scaletune.store import (
    JobOutcome,
    JobStatus,
    MetricPoint,
    NewTrainingJob,
    RejectedMetric,
    Store,
    TrainingJobRecord,
)
from scaletune.training._ids import new_job_id
from scaletune.training._paths import SCRATCH_PREFIX, JobPaths
from scaletune.training._staging import JobStaging, check_staging
from scaletune.training._stopper import Stopper
from scaletune.worker import (
    ChannelShard,
    Exited,
    Failed,
    Finished,
    LogOutput,
    Report,
    WorkerTask,
)

ROOT_CAUSE_SECONDS = 0.5
STOP_FILE = "stop"  # in the job's scratch folder: asks its workers to end at their next step


@dataclass(frozen=True)
class PreparedJob:
    """A job whose inputs were checked and whose record exists (status Pending)."""

    id: str
    spec: TrainingJobSpec
    algorithm: Algorithm
    hyperparameters: BaseModel
    data: PreparedData
    paths: JobPaths


@dataclass(frozen=True)
class _Ending:
    status: JobStatus
    reason: str | None = None


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
    ) -> None:
        self.store = store
        self.backend = backend
        self.jobs_dir = jobs_dir
        self.clock = clock or SystemClock()
        self.poll_seconds = poll_seconds
        self.stop_check_seconds = stop_check_seconds
        # Batched so the controller costs the workers little CPU; flushed at the end in any case.
        self.metrics_flush_seconds = metrics_flush_seconds
        self.stop_grace_seconds = stop_grace_seconds  # then workers are killed
        self.datasets = PreparedDatasets()  # built-in datasets, prepared once for all jobs

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
        algorithm = get_algorithm(spec.algorithm)
        hyperparameters = algorithm.parse_hyperparameters(spec.hyperparameters)
        data = algorithm.prepare_data(hyperparameters, load_channels(spec, self.datasets))
        check_staging(spec.cluster.staging)
        hyperparameters = data.hyperparameters or hyperparameters
        now = self.clock.time()
        job_id = job_id or new_job_id(spec.name or spec.algorithm.value, now)
        paths = JobPaths.for_job(self.jobs_dir, job_id, spec)
        self.store.create_training_job(
            new_job_record(
                spec,
                job_id,
                created_at=now,
                log_dir=str(paths.logs),
                tuning_job_id=tuning_job_id,
                trial_number=trial_number,
            )
        )
        return PreparedJob(job_id, spec, algorithm, hyperparameters, data, paths)

    def run(
        self,
        job: PreparedJob,
        stop: Stopper | None = None,
        on_started: Callable[[Group], None] | None = None,
        on_report: Callable[[Report], None] | None = None,
    ) -> TrainingJobRecord:
        """Run to the end. Ctrl-C stops the job (status Stopped), then re-raises.

        `on_started` gets the worker group once placed; `on_report` each report (progress).
        """
        stop = stop or Stopper()
        start_time, started = self.clock.time(), self.clock.monotonic()
        self.store.mark_in_progress(job.id, start_time, os.getpid(), socket.gethostname())
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{job.id}-"))
        staging: JobStaging | None = None
        final_metrics: dict[str, float] = {}
        pending: list[MetricPoint] = []  # reports not yet in the store
        group: Group | None = None
        rendezvous: GroupRendezvous | None = None
        interrupted = False
        try:
            staging = JobStaging.create(job.spec.cluster.staging, job.id, scratch)
            tasks, rendezvous = self._tasks(job, staging)
            wait = _RoomWait(self, job, stop, started)
            group = self.backend.launch(tasks, job.spec.cluster, abandon=wait)
            if wait.waited:
                self.store.set_waiting(job.id, None)  # placed at last
            if on_started is not None:
                on_started(group)
            ending = self._supervise(
                job,
                group,
                stop,
                started,
                final_metrics,
                pending,
                on_report or _ignore,
            )
        except KeyboardInterrupt:
            interrupted = True
            ending = _Ending(JobStatus.STOPPED, "interrupted (Ctrl-C)")
        except LaunchAbandonedError as exc:  # stopped while waiting for room
            ending = _Ending(stop.status if stop.is_set() else JobStatus.STOPPED, str(exc))
        except Exception as exc:
            ending = _Ending(JobStatus.FAILED, f"controller error: {type(exc).__name__}: {exc}")
        artifact = None
        try:
            # Every worker finished its task (it completed, or stopped when asked): the
            # workers go back to the pool and the model is published. Otherwise they die.
            clean = (
                group is not None and group.all_finished and ending.status is not (JobStatus.FAILED)
            )
            if group is not None:
                group.release() if clean else group.kill()
            if rendezvous is not None:
                # A stopped job's programs may have been ended mid-collective (a user's
                # script is killed): waiting for the tracker to see them finish is pointless.
                rendezvous.close(completed=clean and ending.status is JobStatus.COMPLETED)
            if clean:
                try:
                    assert staging is not None  # a group was placed, so staging was made
                    artifact = str(self._publish(job, staging.fetch_model()))
                except (OSError, InvalidInputError) as exc:
                    ending = _Ending(JobStatus.FAILED, f"could not publish the model: {exc}")
        finally:
            if staging is not None:
                staging.remove()
            shutil.rmtree(scratch, ignore_errors=True)
            self.store.append_metrics(job.id, pending)
            wall = self.clock.monotonic() - started
            self.store.finish_training_job(
                job.id,
                JobOutcome(
                    status=ending.status,
                    start_time=start_time,
                    end_time=start_time + wall,
                    wall_seconds=wall,
                    billable_seconds=job.spec.instance_count * wall,
                    final_metrics=final_metrics,
                    failure_reason=ending.reason,
                    artifact=artifact,
                ),
            )
        if interrupted:
            raise KeyboardInterrupt
        return self.store.get_training_job(job.id)

    def _tasks(
        self, job: PreparedJob, staging: JobStaging
    ) -> tuple[list[WorkerTask], GroupRendezvous]:
        shards = {
            name.value: ChannelShard(
                TableFiles.write(table, staging.data_folder(name)),
                sharded=job.spec.sharding(name) is ShardingMode.SHARDED,
                source=job.spec.channels[name].path or job.spec.channels[name].dataset_file,
            )
            for name, table in job.data.tables.items()
        }
        staging.prepare()
        job.paths.logs.mkdir(parents=True, exist_ok=True)
        world_size = job.spec.instance_count
        rendezvous = GroupRendezvous(
            world_size,
            xgboost_tracker=job.algorithm.wants_xgboost_tracker(job.spec) and world_size > 1,
            worker_addresses=job.spec.script is not None,
            host=self.backend.rendezvous_host,
        )
        tasks = [
            WorkerTask(
                job_id=job.id,
                rank=rank,
                world_size=world_size,
                program=job.algorithm.program,
                hyperparameters=job.hyperparameters,
                channels=shards,
                model_dir=staging.model_dir,
                model_url=staging.model_url,
                log_path=job.paths.log_path(rank),
                rendezvous=rendezvous.info,
                seed=job.spec.seed,
                stop_file=staging.scratch / STOP_FILE,
                distribution=job.spec.distribution,
                script=job.spec.script,
                reporting_rank=job.spec.script.metrics_rank if job.spec.script else 0,
            )
            for rank in range(world_size)
        ]
        return tasks, rendezvous

    def _supervise(
        self,
        job: PreparedJob,
        group: Group,
        stop: Stopper,
        started: float,
        final_metrics: dict[str, float],
        pending: list[MetricPoint],
        on_report: Callable[[Report], None],
    ) -> _Ending:
        deadline = started + job.spec.max_runtime_seconds
        next_stop_check = next_flush = started
        finished: set[int] = set()
        stopping: _Ending | None = None  # set once the workers were asked to stop
        grace_ends = float("inf")
        while len(finished) < job.spec.instance_count:
            now = self.clock.monotonic()
            failures: list[Failed | Exited] = []
            wait = min(self.poll_seconds, max(min(deadline, grace_ends) - now, 0.0))
            for event in group.poll(wait):
                if isinstance(event, Report):
                    for name, value in event.metrics.items():
                        pending.append(MetricPoint(name, event.step, value, event.time))
                        final_metrics[name] = value
                    if event.rejected:  # rare: written at once
                        self.store.append_rejected(
                            job.id,
                            [
                                RejectedMetric(name, event.step, text, event.time)
                                for name, text in event.rejected.items()
                            ],
                        )
                    on_report(event)
                elif isinstance(event, LogOutput):
                    _append_log(job, event)
                elif isinstance(event, Finished):
                    finished.add(event.rank)
                elif isinstance(event, Failed | Exited):
                    failures.append(event)
            if failures:
                return _failure(self._with_root_cause(job, group, failures))
            now = self.clock.monotonic()
            if now >= next_flush:
                next_flush = now + self.metrics_flush_seconds
                self.store.append_metrics(job.id, pending)
                pending.clear()
            if stopping is not None:
                if now >= grace_ends:  # the program did not stop by itself: run() kills it
                    return stopping
                continue
            if stop.is_set():
                stopping = _Ending(stop.status, stop.reason)
            elif now >= next_stop_check and self.store.is_stop_requested(job.id):
                stopping = _Ending(JobStatus.STOPPED, "stop requested")
            elif now >= deadline:
                stopping = _Ending(
                    JobStatus.STOPPED,
                    f"max_runtime_seconds={job.spec.max_runtime_seconds:g} reached",
                )
            if now >= next_stop_check:
                next_stop_check = now + self.stop_check_seconds
            if stopping is not None:
                # Ask first: a program that checks ends cleanly at its next step, saves its
                # model, and its workers stay warm for the next job.
                group.request_stop()
                grace_ends = now + self.stop_grace_seconds
        return stopping or _Ending(JobStatus.COMPLETED)

    def _with_root_cause(
        self, job: PreparedJob, group: Group, failures: list[Failed | Exited]
    ) -> list[Failed | Exited]:
        """A worker's death makes its peers' collectives fail: give a death time to show
        (and the workers' last output time to reach the log)."""
        if not any(isinstance(event, Exited) for event in failures):
            for event in group.poll(ROOT_CAUSE_SECONDS):
                if isinstance(event, Exited):
                    failures.append(event)
                elif isinstance(event, LogOutput):
                    _append_log(job, event)
        return failures

    def _publish(self, job: PreparedJob, staged: Path) -> Path:
        """Move the model into place in one step, so no half-written artefact is ever seen."""
        for name, content in job.data.artifact_files.items():
            (staged / name).write_bytes(content)
        target = job.paths.artifact
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(staged, partial)
        partial.rename(target)
        return target


class _RoomWait:
    """Asked now and then while a job's workers wait for room (Ray): the reason to give up
    waiting, if any. The first call marks the job as waiting in the store."""

    def __init__(
        self, controller: TrainingController, job: PreparedJob, stop: Stopper, started: float
    ) -> None:
        self._controller, self._job, self._stop = controller, job, stop
        self._deadline = started + job.spec.max_runtime_seconds
        self.waited = False

    def __call__(self) -> str | None:
        store, clock = self._controller.store, self._controller.clock
        if not self.waited:
            self.waited = True
            store.set_waiting(self._job.id, clock.time())
        if self._stop.is_set():
            return self._stop.reason
        if store.is_stop_requested(self._job.id):
            return "stop requested"
        if clock.monotonic() >= self._deadline:
            return f"max_runtime_seconds={self._job.spec.max_runtime_seconds:g} reached"
        return None


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
        algorithm=spec.algorithm.value,
        spec=spec.model_dump(mode="json"),
        hyperparameters=dict(spec.hyperparameters),
        instance_count=spec.instance_count,
        created_at=created_at,
        log_dir=log_dir,
        tuning_job_id=tuning_job_id,
        trial_number=trial_number,
    )


def _failure(failures: list[Failed | Exited]) -> _Ending:
    """The job's reason: a worker that died if any (the cause), else the first error."""
    died = [event for event in failures if isinstance(event, Exited)]
    if died:
        event = died[0]
        return _Ending(
            JobStatus.FAILED,
            f"worker {event.rank} exited unexpectedly "
            f"({event.reason or _exit_text(event.exitcode)})",
        )
    first = failures[0]
    assert isinstance(first, Failed)
    return _Ending(JobStatus.FAILED, f"worker {first.rank} failed: {first.error}")


def _append_log(job: PreparedJob, event: LogOutput) -> None:
    with job.paths.log_path(event.rank).open("a", encoding="utf-8") as log:
        log.write(event.text)


def _ignore(report: Report) -> None:
    pass


def _exit_text(exitcode: int | None) -> str:
    if exitcode is None:
        return "exit status unknown"
    if exitcode < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"
