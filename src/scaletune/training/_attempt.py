"""The parts of one attempt of a job: its workers' tasks (with the checkpoint to start
from), the channels written once for every attempt, the wait for room, and the group and
rendezvous that end with the attempt."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scaletune.checkpoints import Checkpoint, CheckpointFolder, CheckpointPlan
from scaletune.clock import Clock
from scaletune.cluster import Group, GroupRendezvous
from scaletune.data import TableFiles
from scaletune.spec import ShardingMode
from scaletune.store import Store
from scaletune.training._prepared import PreparedJob
from scaletune.training._report_writer import ReportWriter
from scaletune.training._staging import JobStaging
from scaletune.training._stopper import Stopper
from scaletune.worker import JUDGED_FILE, ChannelShard, Report, WorkerTask

STOP_FILE = "stop"  # in the job's scratch folder: asks its workers to end at their next step


def write_shards(job: PreparedJob, staging: JobStaging) -> dict[str, ChannelShard]:
    """Each channel once, for every attempt."""
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
    return shards


def worker_tasks(
    job: PreparedJob,
    staging: JobStaging,
    shards: Mapping[str, ChannelShard],
    resume: Checkpoint | None,
    attempt: int,
    host: str,
    size: int,
) -> tuple[list[WorkerTask], GroupRendezvous]:
    """One attempt's tasks at `size` workers, with a rendezvous of its own and the checkpoint
    to start from."""
    world_size = job.spec.tasks_at(size)  # the workers, and a chief and servers where they run
    # The stop the attempt before was asked (an elastic job's resize), and the verdicts it
    # got, are not this one's.
    (staging.scratch / STOP_FILE).unlink(missing_ok=True)
    (staging.scratch / JUDGED_FILE).unlink(missing_ok=True)
    needs = job.algorithm.rendezvous_needs(job.spec)
    rendezvous = GroupRendezvous(
        world_size,
        xgboost_tracker=needs.collective_tracker and world_size > 1,
        worker_addresses=needs.worker_addresses,
        host=host,
        collective_timeout_seconds=job.spec.retry.collective_timeout_seconds,
    )
    plan = None
    if job.checkpoints is not None:
        every = job.spec.checkpoint
        plan = CheckpointPlan(
            job.checkpoints.root,
            every.every_steps,
            every.every_seconds,
            every.keep,
            resume_step=None if resume is None else resume.step,
            resume_reported_step=None if resume is None else reported_step(resume),
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
            checkpoint=plan,
            attempt=attempt,
            scratch=staging.scratch,
            concurrent_workers=job.concurrent_workers,
            elastic=job.spec.elastic,
            capacity=job.spec.capacity_of_rank(rank),
            judged_steps=job.judged_steps,
        )
        for rank in range(world_size)
    ]
    return tasks, rendezvous


INHERITED_FROM = "inherited_from"  # in a copied checkpoint's meta: the job it came from


def reported_step(checkpoint: Checkpoint) -> int | None:
    """The last step the job had reported when the checkpoint was saved."""
    saved = checkpoint.meta.get("reported_step")
    return None if saved is None else int(saved)


def last_reported_step(store: Store, job_id: str) -> int | None:
    """The highest step the job's reports in the store reached."""
    return max((point.step for point in store.metrics(job_id)), default=None)


def reports_stored(checkpoint: Checkpoint, stored_up_to: int | None) -> bool:
    """Whether every report up to the checkpoint is in the store. Reports reach the store
    in order, so `stored_up_to` (the highest step there) says how far they go. A checkpoint
    is on disk before its controller has stored the reports that came just before it (they
    are flushed when it hears of the checkpoint), and one killed in between never does."""
    if checkpoint.meta.get(INHERITED_FROM) is not None:
        return True  # another job's (start_from): its reports were copied with it
    reported = reported_step(checkpoint)
    return reported is None or (stored_up_to is not None and reported <= stored_up_to)


def resume_point(folder: CheckpointFolder, stored_up_to: int | None) -> Checkpoint | None:
    """The newest whole checkpoint whose reports are all in the store: a newer one would
    leave a gap in the curve, so the one before it serves instead."""
    return folder.latest(lambda checkpoint: reports_stored(checkpoint, stored_up_to))


class RoomWait:
    """Asked now and then while a job's workers wait for room (Ray): the reason to give up
    waiting, if any. The first call marks the job as waiting in the store."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        job: PreparedJob,
        stop: Stopper,
        started: float,
        size: int,
        placeable: Callable[[], int] | None = None,
    ) -> None:
        self._store, self._clock, self._job, self._stop = store, clock, job, stop
        self._deadline = started + job.spec.max_runtime_seconds
        timeout = job.spec.retry.placement_timeout_seconds
        self._placement_deadline = None if timeout is None else clock.monotonic() + timeout
        self._size = size
        self._placeable = placeable  # an elastic job's size that fits now
        self.waited = False
        self.timed_out = False  # placement_timeout_seconds passed: the job fails
        self.resize_to: int | None = None  # capacity went while it waited: a smaller size

    def shrink(self) -> int:
        """Wait on for the smaller size it gave up for (same deadlines); that size."""
        assert self.resize_to is not None
        self._size, self.resize_to = self.resize_to, None
        return self._size

    def __call__(self) -> str | None:
        store, clock = self._store, self._clock
        if not self.waited:
            self.waited = True
            store.set_waiting(self._job.id, clock.time())
        if self._stop.is_set():
            return self._stop.reason
        if store.is_stop_requested(self._job.id):
            return "stop requested"
        fits = None if self._placeable is None else self._placeable()
        if fits is not None and fits < self._size:  # never below the fewest: those wait
            self.resize_to = fits
            return f"resized to {fits} workers: room for {self._size} went while they waited"
        spec = self._job.spec
        if self._placement_deadline is not None and clock.monotonic() >= self._placement_deadline:
            self.timed_out = True
            fewest = " (its fewest)" if spec.elastic else ""
            return (
                f"{self._size} workers{fewest} could not be placed within "
                f"retry.placement_timeout_seconds={spec.retry.placement_timeout_seconds:g}"
            )
        if clock.monotonic() >= self._deadline:
            return f"max_runtime_seconds={spec.max_runtime_seconds:g} reached"
        return None


class LiveAttempt:
    """The running attempt's worker group and rendezvous, ended once the attempt is over."""

    def __init__(self) -> None:
        self.group: Group | None = None
        self.rendezvous: GroupRendezvous | None = None

    def end(self, *, completed: bool) -> bool:
        """Release the workers if every one finished its task (True), else kill them."""
        group, rendezvous, self.group, self.rendezvous = self.group, self.rendezvous, None, None
        clean = group is not None and group.all_finished
        if group is not None:
            group.release() if clean else group.kill()
        if rendezvous is not None:
            # A stopped job's programs may have been ended mid-collective (a user's
            # script is killed): waiting for the tracker to see them finish is pointless.
            rendezvous.close(completed=clean and completed)
        return clean


@dataclass(frozen=True)
class JobRun:
    """What every attempt of one run of a job shares."""

    job: PreparedJob
    staging: JobStaging
    shards: Mapping[str, ChannelShard]  # the channels, written once for every attempt
    stop: Stopper
    started: float  # monotonic, when the run began: max_runtime_seconds counts from it
    live: LiveAttempt
    writer: ReportWriter
    on_started: Callable[[Group], None] | None
    on_report: Callable[[Report], None]
    in_tuning_job: bool = False  # a trial: on a notice it pauses, and its tuning job resumes it
