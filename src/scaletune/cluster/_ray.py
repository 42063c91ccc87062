"""Worker groups as Ray actors: a job's N workers in one placement group (PACK or SPREAD), each
running the very same worker programs as a local worker process. Ray only places them; rank,
world size and rendezvous come from the controller as for the local backend.

Ray is imported only here, and only when a RayBackend is made (pip install 'scaletune[ray]').
Past 400 lines on purpose: the backend, its actor class and its group share the placement
groups' life and Ray's handles; apart, each would reach into the others' private state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

from scaletune.cluster._backend import Abandon
from scaletune.cluster._process import run_payload
from scaletune.cluster._programs import check_importable, with_program_modules
from scaletune.cluster._ray_capacity import (
    SPOT_MARK,
    SPOT_RESOURCE,
    is_spot,
    off_spot_nodes,
    room_for,
    spot_nodes,
)
from scaletune.cluster._ray_drains import DrainedNodes
from scaletune.cluster._rendezvous import LOOPBACK, free_port
from scaletune.errors import (
    ClusterTooSmallError,
    InvalidInputError,
    LaunchAbandonedError,
    WorkerStartError,
)
from scaletune.spec import BackendName, CapacityClass, CapacityPlan, ClusterSpec, Placement
from scaletune.worker import (
    GOES_ON,
    Exited,
    Failed,
    Finished,
    LogOutput,
    Notice,
    WorkerEvent,
    WorkerProgram,
    WorkerTask,
    remember_environment,
)

DRAIN_WAIT_SECONDS = 1.0  # a poll waits this long at most for an actor that does not answer
WAIT_SLICE_SECONDS = 0.5  # how often a job waiting for room asks whether to go on waiting
LOG_PREFIX = "scaletune-ray-worker-"  # then the actor's pid: its node's temp folder


@dataclass(frozen=True)
class WorkerResources:
    """What Ray reserves for each worker of a job, and how the job's workers are spread."""

    cpus: float = 1.0
    gpus: float = 0.0
    memory_bytes: int | None = None
    placement: Placement = Placement.PACK
    spot_from: int | None = None  # ranks from this one run on spot capacity; None: none

    def __post_init__(self) -> None:
        if self.cpus < 0 or self.gpus < 0:
            raise InvalidInputError(f"worker resources cannot be negative (got {self})")

    @classmethod
    def of(cls, cluster: ClusterSpec, spot_from: int | None = None) -> WorkerResources:
        memory = cluster.memory_per_worker_mb
        return cls(
            cluster.cpus_per_worker,
            cluster.gpus_per_worker,
            None if memory is None else memory * 2**20,
            cluster.placement,
            spot_from,
        )

    @classmethod
    def of_tasks(cls, cluster: ClusterSpec, tasks: Sequence[WorkerTask]) -> WorkerResources:
        spot = [task.rank for task in tasks if task.capacity is CapacityClass.SPOT]
        return cls.of(cluster, min(spot, default=None))

    def bundle(self, rank: int = 0) -> dict[str, float]:
        bundle = {"CPU": self.cpus}
        if self.gpus:
            bundle["GPU"] = self.gpus
        if self.memory_bytes is not None:
            bundle["memory"] = float(self.memory_bytes)
        if self.on_spot(rank):
            bundle[SPOT_RESOURCE] = SPOT_MARK
        return bundle

    def bundles(self, count: int) -> list[dict[str, float]]:
        return [self.bundle(rank) for rank in range(count)]

    def on_spot(self, rank: int) -> bool:
        return self.spot_from is not None and rank >= self.spot_from

    def label_selectors(self, count: int, spot: frozenset[str]) -> list[dict[str, str]]:
        """Each bundle's: on-demand workers kept off the spot nodes (`spot`, their ids)."""
        return [{} if self.on_spot(rank) else off_spot_nodes(spot) for rank in range(count)]

    def wanted(self, count: int) -> dict[str, float]:
        """What `count` workers ask of the cluster in all."""
        total: dict[str, float] = {}
        for bundle in self.bundles(count):
            for key, value in bundle.items():
                total[key] = total.get(key, 0.0) + value
        return total


class _Worker:
    """A Ray actor (made remote in RayBackend): imports once, runs task after task. `run` runs
    in one thread of the actor and `drain`/`stop` in another, so reports and the worker's
    output stream back while the task runs, and a stop reaches it on whatever node it is."""

    def __init__(self, sys_path: list[str], preload: tuple[str, ...]) -> None:
        remember_environment()  # before the preloaded modules change it
        sys.path[:] = sys_path  # task programs are pickled by reference to their module
        for module in preload:
            importlib.import_module(module)
        self._events: list[WorkerEvent] = []
        self._lock = threading.Lock()
        self._stopped: dict[str, str] = {}  # jobs asked to stop -> the stop's kind
        self._judged: dict[str, int] = {}  # jobs -> the latest step whose report was judged
        self._log: _LogTail | None = None
        self._rank: int | None = None  # the rank of the task running, if any
        remove_stale_logs(Path(tempfile.gettempdir()))
        # Ray makes an actor in its process's main thread, where signal handlers are set.
        self._ray_sigterm = signal.signal(signal.SIGTERM, self._sigterm)

    def _sigterm(self, signum: int, frame: FrameType | None) -> None:
        """A running task's worker is told its machine goes (a pod's shutdown, a spot VM's
        notice): a notice to the controller, and the task goes on; an idle one ends as Ray
        ends its workers."""
        with self._lock:
            rank = self._rank
            if rank is not None:
                self._events.append(Notice(rank))
                return
        if callable(self._ray_sigterm):
            self._ray_sigterm(signum, frame)

    def address(self) -> tuple[str, int]:
        """Where this worker can be reached: its node's address and a free port there."""
        ray: Any = importlib.import_module("ray")
        host: str = ray.util.get_node_ip_address()
        return host, free_port(host)

    def node(self) -> str:
        """The id of the Ray node this worker was placed on."""
        ray: Any = importlib.import_module("ray")
        return str(ray.get_runtime_context().get_node_id())

    def pid(self) -> int:
        """This worker's process id, on its node."""
        return os.getpid()

    def run(self, rank: int, payload: bytes) -> Finished | Failed:
        # The job's log folder is the controller's: output goes to a file of this node's,
        # whose new lines `drain` hands back.
        handle, name = tempfile.mkstemp(prefix=f"{LOG_PREFIX}{os.getpid()}-", suffix=".log")
        os.close(handle)
        log = _LogTail(rank, Path(name))
        with self._lock:
            self._log, self._rank = log, rank
        try:
            return run_payload(
                rank, payload, self._put, signals_for=self._signals, log_path=log.path
            )
        finally:
            with self._lock:
                self._log, self._rank = None, None
                self._events.extend(log.close())
                # One task at a time: any stop or verdict was for this one.
                self._stopped.clear()
                self._judged.clear()

    def stop(self, job_id: str, goes_on: bool = False) -> None:
        with self._lock:
            self._stopped.setdefault(job_id, GOES_ON if goes_on else "")

    def judged(self, job_id: str, step: int, stop: str | None) -> None:
        """The report of `step` was judged, and `stop` is what was asked then: one call, so
        a task never sees the verdict before the stop (a threaded actor's calls may run out
        of order)."""
        with self._lock:
            if stop is not None:
                self._stopped.setdefault(job_id, stop)
            self._judged[job_id] = max(step, self._judged.get(job_id, step))

    def _signals(self, job_id: str) -> _ActorSignals:
        return _ActorSignals(self, job_id)

    def _put(self, event: WorkerEvent) -> None:
        with self._lock:
            self._events.append(event)

    def drain(self) -> list[WorkerEvent]:
        with self._lock:
            if self._log is not None:
                self._events.extend(self._log.read())
            events, self._events = self._events, []
        return events


@dataclass(frozen=True)
class _ActorSignals:
    """What the controller told one job's task through its actor (ControllerSignals)."""

    worker: _Worker
    job_id: str

    def stop(self) -> str | None:
        return self.worker._stopped.get(self.job_id)

    def judged(self) -> int | None:
        return self.worker._judged.get(self.job_id)


def remove_stale_logs(folder: Path) -> None:
    """Logs of workers that died with no chance to remove them (their raylet killed, say,
    while the machine lived on): the next actor on the machine does."""
    for log in folder.glob(f"{LOG_PREFIX}*.log"):
        pid = log.name.removeprefix(LOG_PREFIX).partition("-")[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            log.unlink(missing_ok=True)


class _LogTail:
    """A worker's log file on its own node, read as it grows."""

    def __init__(self, rank: int, path: Path) -> None:
        self.rank = rank
        self.path = path
        self._offset = 0

    def read(self, *, to_the_end: bool = False) -> list[LogOutput]:
        try:
            with self.path.open("rb") as log:
                log.seek(self._offset)
                data = log.read()
        except OSError:
            return []
        # Whole lines only while the task runs: a line cut in two would be two lines.
        end = len(data) if to_the_end else data.rfind(b"\n") + 1
        self._offset += end
        text = data[:end].decode("utf-8", errors="replace")
        return [LogOutput(self.rank, text)] if text else []

    def close(self) -> list[LogOutput]:
        events = self.read(to_the_end=True)
        self.path.unlink(missing_ok=True)
        return events


@dataclass
class _Placed:
    """A placement group and its actors, one per bundle, rank order."""

    group: Any
    actors: list[Any]
    resources: WorkerResources


class RayBackend:
    """Places each job's workers as actors on a Ray cluster.

    `address` None starts a local Ray instance for this backend and stops it on close; an
    address ("auto", "ray://host:10001", "host:6379") joins that cluster. Groups that finished
    cleanly wait for the next job of the same size (the warm pool). Each actor is a process of
    its own: it imports `preload` and its job's programs' modules, not every algorithm's
    library (the local backend's fork server imports those once for all its workers).
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        warm_pool: bool = True,
        max_idle_workers: int = 8,
        preload: tuple[str, ...] = (),
        start_timeout_seconds: float = 120.0,
        num_cpus: int | None = None,
        cpus_needed: float = 0.0,
    ) -> None:
        try:
            ray: Any = importlib.import_module("ray")  # Any: its stubs are partial
        except ImportError:
            raise InvalidInputError(
                "the ray backend needs Ray: pip install 'scaletune[ray]'"
            ) from None
        self._ray = ray
        self._started_ray = False
        self.notice: str | None = None  # how the Ray instance it started was sized, if notable
        if not ray.is_initialized():
            # RAY_ADDRESS makes ray.init join that cluster, as an address does.
            joins = address is not None or bool(os.environ.get("RAY_ADDRESS"))
            if address is None and num_cpus is None:
                num_cpus, self.notice = _local_cpus(cpus_needed)
            ray.init(
                address=address,
                num_cpus=num_cpus if address is None else None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                # Ray nices its workers by 15 to keep its daemons responsive on a machine of
                # its own. A Ray started here shares this machine: its workers are the job's,
                # and at nice 15 any busy program beside them takes nearly all the CPU (the
                # local backend's run at the controller's priority; so do these).
                _system_config=None if joins else {"worker_niceness": 0},
            )
            self._started_ray = True
        self.warm_pool = warm_pool
        self.max_idle_workers = max_idle_workers
        self._preload = preload
        self._start_timeout = start_timeout_seconds
        self._remote_worker = ray.remote(max_concurrency=2, max_restarts=0)(_Worker)
        self._idle: list[_Placed] = []
        self._lock = threading.Lock()
        self._closed = False
        # The XGBoost tracker runs in the controller: workers on other nodes reach it here.
        self.rendezvous_host = LOOPBACK if address is None else ray.util.get_node_ip_address()
        self.drained = DrainedNodes()  # nodes on their way out: no room, notices
        # On a running cluster (an address), a tuning job's parallel trials spread over nodes
        # of unknown size: each job's workers share their node's cores as if alone there
        # (WorkerContext.threads). A Ray started here runs them all on this machine's cores.
        self._one_machine = address is None

    name = BackendName.RAY
    spot_room_apart = True  # spot workers go to the nodes with the `spot` resource

    def launch(
        self,
        tasks: Sequence[WorkerTask],
        cluster: ClusterSpec | None = None,
        abandon: Abandon | None = None,
    ) -> RayWorkerGroup:
        """Place the job's workers as its ClusterSpec asks (placement, resources per worker).
        While the cluster is busy the job waits for room, for as long as it takes (the whole
        group is reserved at once, so waiting jobs never hold part of it), until `abandon`
        gives a reason to stop."""
        check_importable(tasks)
        resources = WorkerResources.of_tasks(cluster or ClusterSpec(), tasks)
        preload = with_program_modules(self._preload, [task.program for task in tasks])
        placed = self._acquire(len(tasks), resources, preload, abandon)
        if not self._one_machine:
            tasks = [dataclasses.replace(task, concurrent_workers=None) for task in tasks]
        try:
            tasks = self._rendezvous_on_nodes(placed, tasks)
            runs = [
                actor.run.remote(task.rank, pickle.dumps(task))
                for actor, task in zip(placed.actors, tasks, strict=True)
            ]
        except BaseException:
            self._destroy(placed)
            raise
        return RayWorkerGroup(self, placed, runs, tasks[0].job_id if tasks else "")

    def _rendezvous_on_nodes(
        self, placed: _Placed, tasks: Sequence[WorkerTask]
    ) -> list[WorkerTask]:
        """Addresses the workers serve at are on their own nodes: torch's rendezvous on rank
        0's, and each rank's TF_CONFIG address (user scripts) on its own."""
        scripted = bool(tasks and tasks[0].rendezvous.worker_addresses)
        calls = [actor.address.remote() for actor in [placed.actors[0], *placed.actors]]
        (host, port), *addresses = self._ray.get(calls if scripted else calls[:1])
        workers = tuple(f"{h}:{p}" for h, p in addresses)
        return [
            dataclasses.replace(
                task,
                rendezvous=dataclasses.replace(
                    task.rendezvous,
                    master_addr=host,
                    master_port=port,
                    worker_addresses=workers if task.rendezvous.worker_addresses else (),
                ),
            )
            for task in tasks
        ]

    def capacity(self, cluster: ClusterSpec) -> int | None:
        """Workers of `cluster`'s size the Ray cluster could place now beside those running,
        idle groups counted as room (they give way): a node lost, added or being drained
        shows here."""
        with self._lock:
            idle = list(self._idle)
        # A job grows by workers of its last ranks: spot ones where it runs any on spot.
        on_spot = cluster.capacity is not CapacityPlan.ON_DEMAND
        bundle = WorkerResources.of(cluster, 0 if on_spot else None).bundle()
        if not any(value > 0 for value in bundle.values()):
            return None
        return room_for(self._free_per_node(idle), bundle, spot=on_spot)

    def _free_per_node(self, idle: list[_Placed]) -> dict[str, dict[str, float]]:
        """Free resources node by node (not draining), idle groups' bundles given back to the
        nodes that hold them: a worker's bundle fits on one node or not at all."""
        from ray.util.placement_group import placement_group_table

        free = self.drained.per_node()
        for placed in idle:
            with contextlib.suppress(Exception):
                held = placement_group_table(placed.group)["bundles_to_node_id"]
                for index, node in held.items():
                    room = free.setdefault(str(node), {})
                    for key, value in placed.resources.bundle(int(index)).items():
                        room[key] = room.get(key, 0.0) + value
        return free

    def ensure_capacity(self, workers: int) -> None:
        """Keep up to this many idle workers warm (a tuning job's parallel trials)."""
        with self._lock:
            self.max_idle_workers = max(self.max_idle_workers, workers)

    def warm_up(self, programs: Sequence[WorkerProgram] = ()) -> None:
        """Nothing to begin: an actor imports its job's program once placed."""

    def prestart(self, workers: int) -> None:
        """Ray's pool holds whole groups, of the size each job asks for: nothing to start
        before a job says its size, so this only makes room."""
        self.ensure_capacity(workers)

    def release_idle(self) -> None:
        """End every idle group now, giving its reservation back to the cluster."""
        with self._lock:
            idle, self._idle = self._idle, []
        for placed in idle:
            self._destroy(placed)
            self._await_release(placed)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for placed in idle:
            self._destroy(placed)
        if self._started_ray:
            self._started_ray = False
            self._ray.shutdown()

    def __enter__(self) -> RayBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _acquire(
        self,
        count: int,
        resources: WorkerResources,
        preload: tuple[str, ...],
        abandon: Abandon | None = None,
    ) -> _Placed:
        """An idle group of this shape (its task imports what its program needs as it
        unpickles it), else a new one whose actors import `preload` first."""
        with self._lock:
            if self._closed:
                raise WorkerStartError("this backend is closed")
            for index, placed in enumerate(self._idle):
                if len(placed.actors) == count and placed.resources == resources:
                    return self._idle.pop(index)
        self._make_room(count, resources)
        return self._place(count, resources, preload, abandon)

    def _make_room(self, count: int, resources: WorkerResources) -> None:
        """Idle groups hold their reservations: end the oldest until a new group would fit."""
        wanted = resources.wanted(count)
        while True:
            available = self._ray.available_resources()
            if all(available.get(key, 0.0) >= value for key, value in wanted.items()):
                return
            with self._lock:
                if not self._idle:
                    return  # busy groups hold the rest: placement waits for them
                oldest = self._idle.pop(0)
            # Awaited until free: RoomWait asks what fits next, and an elastic job would
            # shrink to the lagging view (a growth placed smaller than the group it left).
            self._end_and_await_room(oldest)

    def _end_and_await_room(self, placed: _Placed, seconds: float = 5.0) -> None:
        """End a group (failed, or idle and in the way), and wait (a while) until the cluster
        shows what it held on nodes still alive as free: an elastic job asks what fits right
        after, and Ray's view of free resources lags a removed group's release."""
        from ray.util.placement_group import placement_group_table

        held_on: list[str] = []  # the node of each bundle, read while the group has them
        with contextlib.suppress(Exception):
            held_on = list(placement_group_table(placed.group)["bundles_to_node_id"].values())
        before = self._ray.available_resources()
        self._destroy(placed)
        self._await_release(placed)
        alive = {node["NodeID"] for node in self._ray.nodes() if node["Alive"]}
        back = sum(node in alive for node in held_on)
        expected = {
            key: before.get(key, 0.0) + value * back
            for key, value in placed.resources.bundle().items()
            if value > 0
        }
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:  # another job may take it first: bounded
            available = self._ray.available_resources()
            if all(available.get(key, 0.0) >= value - 1e-9 for key, value in expected.items()):
                return
            self._ray.wait([], timeout=0.05)

    def _await_release(self, placed: _Placed) -> None:
        """A removed placement group gives its resources back asynchronously."""
        from ray.util.placement_group import placement_group_table

        for _ in range(100):
            state = placement_group_table(placed.group).get("state")
            if state in (None, "REMOVED"):
                return
            self._ray.wait([], timeout=0.05)

    def _check_fits(self, count: int, resources: WorkerResources) -> None:
        wanted = resources.wanted(count)
        totals = self._ray.cluster_resources()
        self._check_on_demand_fits(count, resources)
        if SPOT_RESOURCE in wanted and totals.get(SPOT_RESOURCE, 0.0) < wanted[SPOT_RESOURCE]:
            raise ClusterTooSmallError(
                "cluster.capacity asks for spot workers, but no node of the Ray cluster offers "
                "spot capacity: start spot nodes with "
                f"ray start --resources='{{\"{SPOT_RESOURCE}\": 1}}'"
            )
        if any(totals.get(key, 0.0) < value for key, value in wanted.items()):
            raise ClusterTooSmallError(  # waiting would never end
                f"{count} workers of {resources.bundle()} can never be placed: they need "
                f"{wanted}, the Ray cluster has {_totals(totals)}; ask less of each worker "
                "(cluster.cpus_per_worker = 0.5, say) or give the cluster more "
                f"(ray start --num-cpus {math.ceil(wanted.get('CPU', 0.0))})"
            )

    def _check_on_demand_fits(self, count: int, resources: WorkerResources) -> None:
        """On-demand workers go on the nodes without spot capacity alone: those must hold
        them (whatever spot nodes offer)."""
        on_demand = [rank for rank in range(count) if not resources.on_spot(rank)]
        nodes = [node for node in self._ray.nodes() if node.get("Alive")]
        if not on_demand or not spot_nodes(nodes):
            return
        totals: dict[str, float] = {}
        for node in nodes:
            if not is_spot(node.get("Resources", {})):
                for key, value in node["Resources"].items():
                    totals[key] = totals.get(key, 0.0) + value
        wanted: dict[str, float] = {}
        for rank in on_demand:
            for key, value in resources.bundle(rank).items():
                wanted[key] = wanted.get(key, 0.0) + value
        if any(totals.get(key, 0.0) < value for key, value in wanted.items()):
            raise ClusterTooSmallError(
                f"{len(on_demand)} on-demand workers of {resources.bundle()} can never be "
                f"placed: they need {wanted} on nodes without spot capacity, which have "
                f"{_totals(totals)}; start on-demand nodes, or run more of the job on spot "
                "(cluster.capacity)"
            )

    def _place(
        self,
        count: int,
        resources: WorkerResources,
        preload: tuple[str, ...],
        abandon: Abandon | None = None,
    ) -> _Placed:
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self._check_fits(count, resources)

        def ask(spot: frozenset[str]) -> Any:
            return placement_group(
                resources.bundles(count),
                strategy=resources.placement.value,
                bundle_label_selector=resources.label_selectors(count, spot),
            )

        spot = spot_nodes(self._ray.nodes())
        placed = _Placed(ask(spot), [], resources)
        try:
            while not self._ray.wait([placed.group.ready()], timeout=WAIT_SLICE_SECONDS)[0]:
                reason = abandon() if abandon is not None else None
                if reason is not None:
                    raise LaunchAbandonedError(reason)
                self._check_fits(count, resources)  # a node may have left meanwhile
                self._make_room(count, resources)  # groups gone idle meanwhile give way
                # A spot node that joined while the group waits: asked again, off it too.
                joined = spot_nodes(self._ray.nodes()) - spot
                if joined and not all(resources.on_spot(rank) for rank in range(count)):
                    remove_placement_group(placed.group)
                    spot |= joined
                    placed = _Placed(ask(spot), [], resources)
            for index in range(count):
                placed.actors.append(
                    self._remote_worker.options(
                        num_cpus=resources.cpus,
                        num_gpus=resources.gpus,
                        memory=resources.memory_bytes,
                        scheduling_strategy=PlacementGroupSchedulingStrategy(
                            placement_group=placed.group, placement_group_bundle_index=index
                        ),
                    ).remote(list(sys.path), preload)
                )
            # Wait until every actor has done its imports (a failed start raises here).
            started = [actor.drain.remote() for actor in placed.actors]
            done, _ = self._ray.wait(started, num_returns=count, timeout=self._start_timeout)
            if len(done) < count:
                raise WorkerStartError(
                    f"Ray workers did not start within {self._start_timeout:.0f} s"
                )
            self._ray.get(started)
        except BaseException as exc:
            self._destroy(placed)
            if isinstance(exc, WorkerStartError | LaunchAbandonedError | KeyboardInterrupt):
                raise
            raise WorkerStartError(f"a Ray worker did not start: {exc}") from None
        return placed

    def _give_back(self, placed: _Placed) -> None:
        with self._lock:
            idle = sum(len(p.actors) for p in self._idle)
            if (
                self.warm_pool
                and not self._closed
                and idle + len(placed.actors) <= self.max_idle_workers
            ):
                self._idle.append(placed)
                return
        self._end_and_await_room(placed)  # the job's next attempt may ask what fits at once

    def _destroy(self, placed: _Placed) -> None:
        from ray.util.placement_group import remove_placement_group

        for actor in placed.actors:
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)
        with contextlib.suppress(Exception):
            remove_placement_group(placed.group)


class RayWorkerGroup:
    """The N actors of one job, which live and die as one."""

    def __init__(self, backend: RayBackend, placed: _Placed, runs: list[Any], job_id: str) -> None:
        self._backend = backend
        self._job_id = job_id
        self._ray = backend._ray
        self._placed = placed
        self._runs = runs  # rank -> the ObjectRef of its task's outcome
        self._done: set[int] = set()  # ranks whose task ended (or whose actor died)
        self._finished: set[int] = set()
        self._ended = False
        # A drain an actor has not answered yet (stopped, hung, its node gone) is not asked
        # again; when each rank's actor last answered one.
        self._drains: dict[int, Any] = {}
        self._heard = [time.monotonic()] * len(runs)
        self._bundle_nodes: dict[int, str] = {}  # rank -> its node's id, once placed
        self._noticed: set[int] = set()  # ranks whose machine goes (SIGTERM, a drained node)
        self._stop_asked: str | None = None  # the kind of the first stop asked, if any

    @property
    def pids(self) -> list[int]:
        return []  # actors may live on other machines: there is no local pid to watch

    @property
    def locations(self) -> list[str]:
        """From the placement group's bundles (rank r's actor holds bundle r) and the node
        table, so a worker that is not answering does not hold this up."""

        bundles = self._node_of_rank()
        addresses = {node["NodeID"]: node["NodeManagerAddress"] for node in self._ray.nodes()}
        where = []
        for rank in range(len(self._placed.actors)):
            node = bundles.get(rank, "")
            where.append(f"{addresses.get(node, 'unknown')} node {node[:8] or '?'}")
        return where

    def _node_of_rank(self) -> dict[int, str]:
        """Rank r's actor holds bundle r: its node, from the placement group's table (kept
        once known: a placed group's bundles stay where they are)."""
        if len(self._bundle_nodes) < len(self._placed.actors):
            from ray.util.placement_group import placement_group_table

            bundles = placement_group_table(self._placed.group).get("bundles_to_node_id") or {}
            self._bundle_nodes = {int(rank): str(node) for rank, node in bundles.items()}
        return self._bundle_nodes

    def _drain_notices(self) -> list[Notice]:
        """A notice for each worker whose node began to drain since the last poll."""
        draining = self._backend.drained.now()
        if not draining:
            return []
        notices = []
        for rank, node in self._node_of_rank().items():
            if node in draining and rank not in self._noticed and rank not in self._done:
                self._noticed.add(rank)
                notices.append(Notice(rank, "Ray drain", draining[node]))
        return notices

    @property
    def nodes(self) -> list[str]:
        """The Ray node of each worker, rank order."""
        return list(self._ray.get([actor.node.remote() for actor in self._placed.actors]))

    @property
    def actor_pids(self) -> list[int]:
        """Each worker's process id on its node, rank order (asked of the actors)."""
        return list(self._ray.get([actor.pid.remote() for actor in self._placed.actors]))

    def poll(self, timeout: float) -> list[WorkerEvent]:
        """Reports as they come, then each ended task's outcome (Exited if its actor died)."""
        pending = {ref: rank for rank, ref in enumerate(self._runs) if rank not in self._done}
        ready: list[Any] = []
        if pending:
            ready, _ = self._ray.wait(
                list(pending), num_returns=len(pending), timeout=max(timeout, 0.0)
            )
        events: list[WorkerEvent] = []
        for rank, actor in enumerate(self._placed.actors):
            if rank not in self._done and rank not in self._drains:
                self._drains[rank] = actor.drain.remote()
        answered, _ = self._ray.wait(
            list(self._drains.values()), num_returns=len(self._drains), timeout=DRAIN_WAIT_SECONDS
        )
        by_ref = {ref: rank for rank, ref in self._drains.items()}
        for ref in answered:
            rank = by_ref[ref]
            del self._drains[rank]
            self._heard[rank] = time.monotonic()
            with contextlib.suppress(Exception):  # a dead actor's run says why, below
                events.extend(self._ray.get(ref))
        from ray.exceptions import RayActorError

        for ref in ready:
            rank = pending[ref]
            self._done.add(rank)
            # Its task has ended: what it sent since the drains above, if its actor lives.
            last = [self._drains.pop(rank, None), self._placed.actors[rank].drain.remote()]
            for drained in filter(None, last):
                with contextlib.suppress(Exception):
                    events.extend(self._ray.get(drained))
            try:
                outcome = self._ray.get(ref)
            except RayActorError as exc:
                events.append(Exited(rank, None, reason=_first_line(exc)))
                continue
            if isinstance(outcome, Finished):
                self._finished.add(rank)
            events.append(outcome)
        events += self._drain_notices()
        self._noticed.update(event.rank for event in events if isinstance(event, Notice))
        return events

    def silent_ranks(self, timeout: float) -> list[int]:
        now = time.monotonic()
        return [
            rank
            for rank, heard in enumerate(self._heard)
            if rank not in self._done and now - heard > timeout
        ]

    def request_stop(self, goes_on: bool = False) -> None:
        """Ask every task to end at its next step, through its actor (on any node)."""
        if self._stop_asked is None:
            self._stop_asked = GOES_ON if goes_on else ""
        for actor in self._placed.actors:
            actor.stop.remote(self._job_id, goes_on)

    def judged(self, step: int) -> None:
        """The verdict, with any stop asked before it, in one call to each actor."""
        for actor in self._placed.actors:
            actor.judged.remote(self._job_id, step, self._stop_asked)

    @property
    def all_finished(self) -> bool:
        return len(self._finished) == len(self._runs)

    def release(self) -> None:
        """Back to the pool if every task finished and no worker's machine is going;
        otherwise the actors are killed."""
        if not self.all_finished or self._noticed:
            self.kill()
        elif not self._ended:
            self._ended = True
            self._backend._give_back(self._placed)

    def kill(self) -> None:
        if not self._ended:
            self._ended = True
            self._backend._end_and_await_room(self._placed)


def _local_cpus(needed: float) -> tuple[int, str | None]:
    """Logical CPUs for a Ray instance started here: this machine's cores, or what the job
    asks at once if that is more. The local backend runs such a job on fewer cores too (the
    workers share them); Ray would refuse to place it."""
    cores = os.cpu_count() or 1
    wanted = math.ceil(needed)
    if wanted <= cores:
        return cores, None
    return wanted, (
        f"Ray: started with {wanted} logical CPUs on this machine's {cores} cores, so that "
        f"the job's {needed:g} CPUs of workers fit; they share the cores, as local workers do"
    )


def _totals(resources: dict[str, float]) -> dict[str, float | str]:
    """CPU, GPU and memory only (Ray also lists every placement group's own keys), in that
    order; memory in GiB."""
    shown: dict[str, float | str] = {
        key: resources[key] for key in ("CPU", "GPU") if key in resources
    }
    if "memory" in resources:
        shown["memory"] = f"{resources['memory'] / 2**30:.1f} GiB"
    return shown


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"Ray: {text[0]}" if text else f"Ray: {type(error).__name__}"
