"""How others end a running job: a stop with a status and a reason, from any thread; and,
for a tuning trial, whether the tuner's verdict at a step it judges is in yet."""

from __future__ import annotations

import threading
from collections.abc import Callable

from scaletune.store import JobStatus


class Stopper:
    """Set once; the first request wins. Stopped jobs end as Stopped unless told Completed
    (a tuning trial that reached its full budget)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.status = JobStatus.STOPPED
        self.reason = "stop requested"
        self.grace_seconds: float | None = None  # the controller's own grace if None
        self.early = False  # a tuner's scheduler stopped it: it ran as asked, for less
        self._listeners: list[Callable[[], None]] = []
        self.verdicts = VerdictGate()

    def request(
        self,
        status: JobStatus = JobStatus.STOPPED,
        reason: str = "stop requested",
        grace_seconds: float | None = None,
        *,
        early: bool = False,
    ) -> None:
        """`grace_seconds`: how long the program has to stop by itself (and checkpoint)
        before it is killed; a preempted machine's SIGTERM gives more than a tuner's stop.
        `early`: a tuning job's early stopping asks (trackers show its end as a finish)."""
        with self._lock:
            if self._event.is_set():
                return
            self.status, self.reason = status, reason
            self.grace_seconds, self.early = grace_seconds, early
            self._event.set()
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()

    def when_requested(self, listener: Callable[[], None]) -> None:
        """Call `listener` once, in the requesting thread, when the stop is requested (now if
        it already was): a runner learns of stops without asking every stopper it holds."""
        with self._lock:
            if not self._event.is_set():
                self._listeners.append(listener)
                return
        listener()

    def is_set(self) -> bool:
        return self._event.is_set()


class VerdictGate:
    """A tuning trial's verdicts at the steps its tuner judges. Most are in as the report is:
    the scheduler decides on it alone. One that waits on other trials (synchronous PBT ranks
    the population once every member has reached the step) is held until released; the
    trial's program waits at that step meanwhile, and a stop decided for it is requested
    before the release, so that it lands there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[int] = set()
        self._listeners: dict[int, list[Callable[[], None]]] = {}

    def hold(self, step: int) -> None:
        with self._lock:
            self._held.add(step)

    def release(self, step: int) -> None:
        with self._lock:
            self._held.discard(step)
            listeners = self._listeners.pop(step, [])
        for listener in listeners:
            listener()

    def is_in(self, step: int) -> bool:
        with self._lock:
            return step not in self._held

    def when_released(self, step: int, listener: Callable[[], None]) -> None:
        """Call `listener` once, in the releasing thread, when `step`'s verdict is in (now if
        it is): a simulated trial goes on from there."""
        with self._lock:
            if step in self._held:
                self._listeners.setdefault(step, []).append(listener)
                return
        listener()
