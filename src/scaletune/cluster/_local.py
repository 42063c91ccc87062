"""Worker groups as local processes, with a warm pool of workers that have done their imports."""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from scaletune.cluster._backend import Abandon
from scaletune.cluster._programs import check_importable, with_program_modules
from scaletune.cluster._rendezvous import LOOPBACK
from scaletune.cluster._slots import SLOTS_VARIABLE, FixedSlots, SlotCount, Slots, slots_from
from scaletune.cluster._starters import WorkerProcess, WorkerStarter, default_starter
from scaletune.errors import ClusterTooSmallError, LaunchAbandonedError, WorkerStartError
from scaletune.spec import BackendName, CapacityClass, CapacityPlan, ClusterSpec
from scaletune.worker import (
    GOES_ON,
    JUDGED_FILE,
    Exited,
    Finished,
    Heartbeat,
    Notice,
    Ready,
    WorkerEvent,
    WorkerProgram,
    WorkerTask,
    write_whole,
)

# What the fork server imports before its first worker, whatever the job: every worker forked
# from it starts its task without paying for these. A job's program modules, which import its
# library (xgboost, torch), come next: when the job is prepared (`warm_up`), or before its first
# worker. (A Ray actor is a process of its own: it imports its job's program modules and
# RayBackend's `preload`, by default nothing more.)
DEFAULT_PRELOAD = ("numpy", "scaletune.algorithms")
KILL_GRACE_SECONDS = 2.0
ROOM_POLL_SECONDS = 0.2  # how often a job waiting for free slots looks again


@dataclass
class _Worker:
    process: WorkerProcess
    conn: Connection

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None and not self.conn.closed

    def reusable(self) -> bool:
        """Alive and idle: an idle worker says nothing, so something to read on its connection
        is its end closed (it died; the fork server may not have told of its exit yet)."""
        try:
            return self.alive() and not self.conn.poll()
        except (OSError, ValueError):
            return False


class LocalBackend:
    """Places each job's N workers as processes on this machine.

    With `warm_pool`, workers that finished a job cleanly wait for the next one, so a job
    of a size seen before starts without spawning or importing anything. Other workers come
    from the `starter`: by default forked from a fork server that has done their imports
    (`_starters`). `slots` bounds the workers running at once (SCALETUNE_LOCAL_SLOTS by
    default: no bound unless set); a job that does not fit waits for room.
    """

    def __init__(
        self,
        *,
        warm_pool: bool = True,
        max_idle_workers: int = 8,
        preload: tuple[str, ...] = DEFAULT_PRELOAD,
        start_timeout_seconds: float = 120.0,
        starter: WorkerStarter | None = None,
        slots: Slots | None = None,
    ) -> None:
        self.warm_pool = warm_pool
        self._slots = slots if slots is not None else slots_from()
        self._in_use: Counter[CapacityClass] = Counter()  # workers of groups not yet ended
        self._starter = starter or default_starter()
        self.max_idle_workers = max_idle_workers
        self._preload = preload
        self._start_timeout = start_timeout_seconds
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _stop_pool, self._idle, self._starter)

    @property
    def idle_pids(self) -> list[int]:
        with self._lock:
            return [worker.pid for worker in self._idle]

    @property
    def server_pids(self) -> list[int]:
        """Processes this backend keeps besides its workers: its fork server, once started."""
        return self._starter.server_pids

    name = BackendName.LOCAL
    rendezvous_host = LOOPBACK  # every worker runs on this machine

    @property
    def spot_room_apart(self) -> bool:
        """Whether its slots are named by class (else any slot serves either)."""
        count = self._slots.count()
        return count is not None and count.by_class is not None

    def launch(
        self,
        tasks: Sequence[WorkerTask],
        cluster: ClusterSpec | None = None,
        abandon: Abandon | None = None,
    ) -> WorkerGroup:
        """`cluster` asks for Ray's placement, which does not apply here; `abandon` ends a
        wait for free slots."""
        check_importable(tasks)
        # Each with the environment as it is now: a warm or forked worker started earlier.
        environment = dict(os.environ)
        payloads = [(task.rank, pickle.dumps(task), environment) for task in tasks]  # fail early
        classes = Counter(task.capacity for task in tasks)
        self._reserve(classes, abandon)
        # The programs' modules too: the fork server imports them once for every later worker.
        preload = with_program_modules(self._preload, [task.program for task in tasks])
        try:
            workers = self._acquire(len(tasks), preload)
        except BaseException:
            self._free(classes)
            raise
        group = WorkerGroup(self, workers, classes, tasks[0].stop_file if tasks else None)
        try:
            for worker, payload in zip(workers, payloads, strict=True):
                worker.conn.send(payload)
        except BaseException:
            group.kill()
            raise
        return group

    def capacity(self, cluster: ClusterSpec | None = None) -> int | None:
        """Workers that could start now beside those running; None: no bound. (Each runs as
        one process here, whatever `cluster` asks of a Ray worker.) With slots named by class,
        those of the class the job grows on: spot where it runs any on spot."""
        with self._lock:
            count = self._slots.count()
            if count is None:
                return None
            free = count.total - self._in_use.total()
            grows_on = _growth_class(cluster)
            of_class = count.of_class(grows_on)
            if of_class is not None:
                free = min(free, of_class - self._in_use[grows_on])
            return max(free, 0)

    def _reserve(self, classes: Counter[CapacityClass], abandon: Abandon | None) -> None:
        """Take these slots, waiting while they are not free (asking `abandon`)."""
        while True:
            with self._lock:
                count = self._slots.count()
                if count is None or _fits(classes, self._in_use, count):
                    self._in_use.update(classes)
                    return
            if isinstance(self._slots, FixedSlots) and not _fits(classes, Counter(), count):
                raise ClusterTooSmallError(
                    f"the job needs {_named(classes, count)} workers at once but this machine "
                    f"runs at most {count} ({SLOTS_VARIABLE})"
                )
            reason = None if abandon is None else abandon()
            if reason is not None:
                raise LaunchAbandonedError(reason)
            time.sleep(ROOM_POLL_SECONDS)

    def _free(self, classes: Counter[CapacityClass]) -> None:
        with self._lock:
            self._in_use.subtract(classes)
            self._in_use = +self._in_use  # none below 0

    def ensure_capacity(self, workers: int) -> None:
        """Keep at least this many idle workers warm (a tuning job's parallel trials)."""
        with self._lock:
            self.max_idle_workers = max(self.max_idle_workers, workers)

    def warm_up(self, programs: Sequence[WorkerProgram] = ()) -> None:
        """Start the fork server if it has not started, importing `preload` and the programs'
        modules (a running one imports a program's before its first worker): a session that
        only reads, or a command whose input is refused, starts none."""
        self._starter.prepare(with_program_modules(self._preload, programs))

    def prestart(self, workers: int) -> None:
        """Start idle workers now, so that the next jobs find them warm."""
        self.ensure_capacity(workers)
        with self._lock:
            missing = workers - len([w for w in self._idle if w.alive()])
        if missing > 0:
            self._give_back(self._spawn(missing, self._preload))

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._finalizer()

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _acquire(self, count: int, preload: tuple[str, ...]) -> list[_Worker]:
        with self._lock:
            if self._closed:
                raise WorkerStartError("this backend is closed")
            usable: list[_Worker] = []
            gone: list[_Worker] = []
            for worker in self._idle:
                (usable if worker.reusable() else gone).append(worker)
            taken, self._idle[:] = usable[:count], usable[count:]
        _stop_workers(gone, polite=False)
        return taken + self._spawn(count - len(taken), preload)

    def _spawn(self, count: int, preload: tuple[str, ...]) -> list[_Worker]:
        workers = []
        try:
            for _ in range(count):  # start all first, then wait: imports run in parallel
                process, conn = self._starter.open(preload, self._start_timeout)
                worker = _Worker(process, conn)
                workers.append(worker)
                worker.conn.send((list(sys.path), preload))
            deadline = time.monotonic() + self._start_timeout
            for worker in workers:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not worker.conn.poll(remaining):
                    raise WorkerStartError(
                        f"a worker did not start within {self._start_timeout:.0f} s"
                    )
                message = worker.conn.recv()
                if not isinstance(message, Ready):
                    raise WorkerStartError(f"a worker started with {message!r} instead of Ready")
        except (EOFError, OSError) as exc:
            _stop_workers(workers)
            raise WorkerStartError(f"a worker process died while starting: {exc}") from None
        except BaseException:
            _stop_workers(workers)
            raise
        return workers

    def _give_back(self, workers: Sequence[_Worker]) -> None:
        keep: list[_Worker] = []
        with self._lock:
            if self.warm_pool and not self._closed:
                room = self.max_idle_workers - len(self._idle)
                keep = [worker for worker in workers if worker.alive()][: max(room, 0)]
                self._idle.extend(keep)
        _stop_workers([worker for worker in workers if worker not in keep])


class WorkerGroup:
    """The N workers of one job, which live and die as one."""

    def __init__(
        self,
        backend: LocalBackend,
        workers: list[_Worker],
        classes: Counter[CapacityClass],
        stop_file: Path | None = None,
    ) -> None:
        self._backend = backend
        self._workers = workers
        self._classes = classes  # the slots it holds, by class
        self._stop_file = stop_file
        self._done: set[int] = set()  # ranks whose process is gone
        self._finished: set[int] = set()  # ranks that finished their task
        self._ended = False
        self._heard = [time.monotonic()] * len(workers)  # when each rank last said anything
        self._leaving: set[int] = set()  # ranks noticed of their machine's end: never reused

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self._workers]

    @property
    def locations(self) -> list[str]:
        host = socket.gethostname()
        return [f"{host} pid {worker.pid}" for worker in self._workers]

    def poll(self, timeout: float) -> list[WorkerEvent]:
        """Messages from the workers, or Exited for each one that died; waits up to `timeout`."""
        watched: dict[Connection, int] = {}
        for rank, worker in enumerate(self._workers):
            if rank not in self._done:
                watched[worker.conn] = rank
        if not watched:
            return []
        events: list[WorkerEvent] = []
        dead: set[int] = set()
        # A worker that dies closes its end of the socket: the connection turns readable.
        for ready in wait(list(watched), timeout=max(timeout, 0.0)):
            rank = watched[ready]  # type: ignore[index]  # wait() returns what it was given
            worker = self._workers[rank]
            try:
                while worker.conn.poll():
                    event = worker.conn.recv()
                    self._heard[rank] = time.monotonic()
                    if isinstance(event, Heartbeat):
                        continue
                    if isinstance(event, Finished):
                        self._finished.add(rank)
                    elif isinstance(event, Notice):
                        self._leaving.add(rank)
                    events.append(event)
            except (EOFError, OSError):
                dead.add(rank)
        for rank in sorted(dead):
            self._done.add(rank)
            if rank in self._finished:  # it finished its task, then left (its machine going)
                continue
            process = self._workers[rank].process
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(KILL_GRACE_SECONDS)
            events.append(Exited(rank, process.returncode))
        return events

    def request_stop(self, goes_on: bool = False) -> None:
        """Ask every task to end at its next step: the stop file they all watch appears
        (saying whether the job goes on). A file, not a signal: a signal interrupts the
        collective's socket calls (EINTR)."""
        if self._stop_file is not None and not self._stop_file.exists():
            write_whole(self._stop_file, GOES_ON if goes_on else "")

    def judged(self, step: int) -> None:
        """The judged file beside the stop file: a stop asked before it is seen first."""
        if self._stop_file is not None:
            write_whole(self._stop_file.with_name(JUDGED_FILE), str(step))

    def silent_ranks(self, timeout: float) -> list[int]:
        now = time.monotonic()
        return [
            rank
            for rank, heard in enumerate(self._heard)
            if rank not in self._done and rank not in self._finished and now - heard > timeout
        ]

    @property
    def all_finished(self) -> bool:
        return len(self._finished) == len(self._workers)

    def release(self) -> None:
        """The job is over: workers that all finished their task go back to the pool; a group
        with any worker still busy (the job was ended early) is killed instead."""
        if not self.all_finished:
            self.kill()
        elif not self._ended:
            self._ended = True
            leaving = [self._workers[rank] for rank in sorted(self._leaving)]
            _stop_workers(leaving, polite=False)
            self._backend._give_back([w for w in self._workers if w not in leaving])
            self._backend._free(self._classes)

    def kill(self) -> None:
        """End every worker now (SIGKILL: one stuck in a collective ends too)."""
        if not self._ended:
            self._ended = True
            _stop_workers(self._workers, polite=False)
            self._backend._free(self._classes)


def _growth_class(cluster: ClusterSpec | None) -> CapacityClass:
    """A job grows by workers of its last ranks: spot ones where it runs any on spot."""
    if cluster is None or cluster.capacity is CapacityPlan.ON_DEMAND:
        return CapacityClass.ON_DEMAND
    return CapacityClass.SPOT


def _fits(
    classes: Counter[CapacityClass], in_use: Counter[CapacityClass], count: SlotCount
) -> bool:
    """Whether these workers fit beside those in use: in all, and on each class named."""
    if in_use.total() + classes.total() > count.total:
        return False
    return all(
        (limit := count.of_class(name)) is None or in_use[name] + wanted <= limit
        for name, wanted in classes.items()
    )


def _named(classes: Counter[CapacityClass], count: SlotCount) -> str:
    if count.by_class is None:
        return str(classes.total())
    return " ".join(f"{name.value}={classes[name]}" for name in CapacityClass)


def _stop_pool(idle: list[_Worker], starter: WorkerStarter) -> None:
    stopping, idle[:] = list(idle), []
    _stop_workers(stopping)
    starter.close()


def _stop_workers(workers: Sequence[_Worker], polite: bool = True) -> None:
    """Idle workers are asked to leave (and killed if they do not); busy ones are killed."""
    workers = list(workers)
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):
            if polite and worker.alive():
                worker.conn.send(None)
            else:  # not SIGTERM: to a busy worker, that is a preemption notice (`Departure`)
                worker.process.kill()
    deadline = time.monotonic() + KILL_GRACE_SECONDS
    for worker in workers:
        try:
            worker.process.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
        with contextlib.suppress(OSError, ValueError):
            worker.conn.close()
