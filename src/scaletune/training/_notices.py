"""Preemption notices to one attempt's workers: a worker's SIGTERM (a spot VM's notice, a
pod's shutdown) or `jobs notice` (a spot watcher's). Each is recorded once in the store; the
first asks the job to checkpoint and go on without the leaving workers (`Respond`), before
their machines go at the notices' deadline."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scaletune.clock import Clock
from scaletune.errors import StoreUnavailableError
from scaletune.spec import TrainingJobSpec
from scaletune.store import JobStatus, NoticeRecord, Store
from scaletune.training._ending import Ending
from scaletune.worker import Notice

# What the job does once these workers leave: the attempt's Ending (a resize, or a pause).
Respond = Callable[[Sequence[NoticeRecord]], Ending]


class AttemptNotices:
    """The notices one attempt's workers got, as the attempt's watch learns of them."""

    def __init__(
        self,
        store: Store,
        job_id: str,
        attempt: int,
        sigterm_seconds: float,  # a notice of unknown length (SIGTERM's) gives this
        clock: Clock,
        respond: Respond,
    ) -> None:
        self._store, self._hurried = store, store.without_waiting()
        self._job_id, self._attempt = job_id, attempt
        self._sigterm_seconds = sigterm_seconds
        self._clock = clock
        self.respond = respond
        self._known: dict[int, NoticeRecord] = {}  # rank -> its first notice

    @property
    def leaving(self) -> list[NoticeRecord]:
        return sorted(self._known.values(), key=lambda notice: notice.rank)

    def from_worker(self, event: Notice) -> bool:
        """A notice the backend saw (a worker's SIGTERM, its Ray node drained): recorded
        with its own length, or for a SIGTERM the job's; whether it is news."""
        if event.rank in self._known:
            return False
        seconds = self._sigterm_seconds if event.seconds is None else event.seconds
        notice = NoticeRecord(self._attempt, event.rank, seconds, event.source, self._clock.time())
        self._known[event.rank] = notice
        self._store.notices.give(self._job_id, notice)
        return True

    def from_store(self) -> bool:
        """Notices given through the store (`jobs notice`), read without waiting: while the
        store is away, the next check reads them. Whether any is news."""
        try:
            given = self._hurried.notices.of(self._job_id, self._attempt)
        except StoreUnavailableError:
            return False
        news = False
        for notice in given:
            if notice.rank not in self._known:
                self._known[notice.rank] = notice
                news = True
        return news

    def seconds_left(self) -> float:
        """Until the first leaving machine goes (its workers with it)."""
        deadline = min(notice.deadline for notice in self._known.values())
        return max(deadline - self._clock.time(), 0.0)


class NoticeResponse:
    """What a job does when workers of an attempt at `size` get a notice: an elastic job with
    enough left goes on without them (with replacements where there is room, as `placeable`
    says of the workers staying); a trial that cannot pauses, and its tuning job resumes it
    before any other; any other job goes on at its size once there is room. From a checkpoint
    its workers save as they stop, so no step is done twice; and a notice never fails a job."""

    def __init__(
        self,
        spec: TrainingJobSpec,
        size: int,
        *,
        in_tuning_job: bool,
        placeable: Callable[[int], int],
    ) -> None:
        self._spec, self._size = spec, size
        self._in_tuning_job, self._placeable = in_tuning_job, placeable

    def __call__(self, leaving: Sequence[NoticeRecord]) -> Ending:
        spec, first = self._spec, leaving[0]
        ranks = ", ".join(str(notice.rank) for notice in leaving)
        noticed = (
            f"{'workers' if len(leaving) > 1 else 'worker'} {ranks} got a preemption notice "
            f"({first.source}, {first.seconds:g} s)"
        )
        staying = self._size - len(leaving)
        goes_on = spec.elastic and staying >= spec.min_workers
        if self._in_tuning_job and not goes_on:
            return Ending(
                JobStatus.PAUSED, f"{noticed}: paused at a checkpoint, to be resumed first"
            )
        try:
            to = self._placeable(staying)
        except StoreUnavailableError:  # room unknown: without them, or as it was
            to = max(staying, spec.min_workers) if spec.elastic else self._size
        return Ending(
            JobStatus.STOPPED,
            f"{noticed}: goes on at {to} workers from a checkpoint",
            resize_to=to,
        )
