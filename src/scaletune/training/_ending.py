"""How an attempt ends, as its watch tells the controller: a status and reason, which kind
of fault broke it, and the size to go on at when the job goes on in a new attempt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from scaletune.store import JobStatus


class Fault(Enum):
    """Why an attempt failed, as the retry policy sees it."""

    INFRASTRUCTURE = "infrastructure"  # a worker killed, lost or silent; a start that broke
    PROGRAM = "program"  # the training program raised: retried only if the job says so
    CONFIGURATION = "configuration"  # asks what the cluster can never give: never retried


@dataclass(frozen=True)
class Ending:
    status: JobStatus
    reason: str | None = None
    fault: Fault | None = None  # for a Failed ending: which kind
    # The job goes on in a new attempt at this size (an elastic job's resize; a notice).
    resize_to: int | None = None


@dataclass(frozen=True)
class Resizing:
    """An elastic job's new size, and why."""

    size: int
    reason: str


# Asked at each stop check while an elastic job trains: a size to move to, or None.
ResizeCheck = Callable[[], Resizing | None]
