"""What the training controller needs of a backend, whichever places the workers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from scaletune.spec import BackendName, ClusterSpec
from scaletune.worker import WorkerEvent, WorkerProgram, WorkerTask

Abandon = Callable[[], str | None]  # why to stop waiting for workers, or None to go on


class Group(Protocol):
    """The N workers of one job, which live and die as one."""

    @property
    def all_finished(self) -> bool: ...

    @property
    def pids(self) -> list[int]: ...

    @property
    def locations(self) -> list[str]:
        """Where each worker runs, rank order, as a person would look for it: host and pid
        on the local backend, node address and id on Ray."""
        ...

    def poll(self, timeout: float) -> list[WorkerEvent]: ...

    def request_stop(self, goes_on: bool = False) -> None:
        """Ask every task to end at its next step (WorkerContext.stop_requested); `goes_on`:
        the job goes on from the checkpoint they save (WorkerContext.stop_goes_on)."""
        ...

    def judged(self, step: int) -> None:
        """The controller judged the report of `step` (any stop it brought asked already):
        the reporting task, held there (WorkerTask.judged_steps), goes on."""
        ...

    def silent_ranks(self, timeout: float) -> list[int]:
        """Ranks whose task still runs but from which nothing (report, output, heartbeat)
        came for `timeout` seconds: stopped (SIGSTOP), hung, or on a machine that is gone."""
        ...

    def release(self) -> None: ...

    def kill(self) -> None: ...


class Backend(Protocol):
    warm_pool: bool  # keep workers of finished jobs for the next ones

    @property
    def spot_room_apart(self) -> bool:
        """Whether `capacity` of a spot or mixed job counts spot room alone (Ray's spot nodes,
        local slots named by class): a mixed job's on-demand workers are not in it. Otherwise
        every slot serves either class."""
        ...

    @property
    def name(self) -> BackendName: ...

    @property
    def rendezvous_host(self) -> str:
        """The address workers reach the controller's services at (XGBoost's tracker)."""
        ...

    def launch(
        self,
        tasks: Sequence[WorkerTask],
        cluster: ClusterSpec | None = None,
        abandon: Abandon | None = None,
    ) -> Group:
        """Place one job's workers (where and with what its ClusterSpec says) and start them.
        A backend that waits for room asks `abandon` now and then: a reason ends the wait
        (LaunchAbandonedError)."""
        ...

    def capacity(self, cluster: ClusterSpec) -> int | None:
        """Workers of this kind that could be placed now beside those running (an elastic
        job grows into them); None: no bound is known."""
        ...

    def ensure_capacity(self, workers: int) -> None: ...

    def warm_up(self, programs: Sequence[WorkerProgram] = ()) -> None:
        """Begin what makes the workers of jobs that run `programs` start sooner (the local
        fork server: its start and their modules' imports), without waiting for it. A job
        being prepared calls it before loading its data, so that the two overlap; opening a
        backend starts nothing."""
        ...

    def prestart(self, workers: int) -> None:
        """Get this many workers ready before the jobs that will use them, where it helps."""
        ...

    def close(self) -> None: ...
