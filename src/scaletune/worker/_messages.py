"""What a worker tells its controller. Plain frozen dataclasses: they cross a pipe (or Ray)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ready:
    pid: int


@dataclass(frozen=True)
class Report:
    rank: int
    step: int
    metrics: dict[str, float]
    time: float
    rejected: dict[str, str] = field(default_factory=dict)  # non-finite values, as text


@dataclass(frozen=True)
class Finished:
    rank: int
    # The program saw a stop request before it returned: its work may be unfinished. False
    # for one that ran to its end, even if a stop was asked meanwhile (too late to matter).
    stopped: bool = False


@dataclass(frozen=True)
class Failed:
    rank: int
    error: str
    traceback: str


@dataclass(frozen=True)
class Exited:
    """The worker process ended (killed, crashed) without saying it finished."""

    rank: int
    exitcode: int | None
    reason: str | None = None  # what the backend knows of why (Ray: node lost, OOM...)


@dataclass(frozen=True)
class LogOutput:
    """What a worker printed, for workers whose log file the controller cannot see (Ray's,
    possibly on another machine): the controller appends it to the job's log."""

    rank: int
    text: str


@dataclass(frozen=True)
class CheckpointSaved:
    """Rank 0 published a complete checkpoint of this step."""

    rank: int
    step: int
    seconds: float  # how long the save took


@dataclass(frozen=True)
class Heartbeat:
    """Sent now and then while a task runs: a worker that falls silent (stopped, hung, its
    machine gone) is taken for lost after the job's heartbeat timeout."""

    rank: int


@dataclass(frozen=True)
class Notice:
    """This worker's machine is going away (SIGTERM: a spot VM's notice, a pod's shutdown):
    the job checkpoints and goes on without it. The worker trains on until its task ends,
    then leaves rather than wait for another."""

    rank: int
    source: str = "SIGTERM"
    seconds: float | None = None  # until the machine goes, if the notice says (the job's own)


WorkerEvent = Report | Finished | Failed | Exited | LogOutput | CheckpointSaved | Heartbeat | Notice
