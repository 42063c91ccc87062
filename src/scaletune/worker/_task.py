"""A worker's assignment in one job, and the context its program runs with."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from scaletune.checkpoints import CheckpointPlan
from scaletune.data import Table, TableFiles, shard_bounds
from scaletune.spec import (
    DEFAULT_COLLECTIVE_TIMEOUT_SECONDS,
    CapacityClass,
    DistributionSpec,
    ScriptSpec,
)
from scaletune.worker._checkpointing import WorkerCheckpoints
from scaletune.worker._messages import Report, WorkerEvent
from scaletune.worker._signals import GOES_ON, ControllerSignals, FileSignals, await_verdict


@dataclass(frozen=True)
class RendezvousNeeds:
    """What an algorithm's workers meet through, beyond rank 0's address (which every group
    gets): XGBoost's tracker (its collective: all-reduce, agreement between ranks), and an
    address of each rank's own, on its own node (TF_CONFIG, LightGBM's machines list)."""

    collective_tracker: bool = False
    worker_addresses: bool = False


@dataclass(frozen=True)
class Rendezvous:
    """How the workers of one group find each other."""

    master_addr: str
    master_port: int
    xgboost_tracker: Mapping[str, str | int] = field(default_factory=dict)
    # "host:port" of each rank, on its own node, for TF_CONFIG (user scripts only).
    worker_addresses: tuple[str, ...] = ()
    # How long a collective waits on a peer before it fails (retry.collective_timeout_seconds).
    collective_timeout_seconds: float = DEFAULT_COLLECTIVE_TIMEOUT_SECONDS


@dataclass(frozen=True)
class ChannelShard:
    files: TableFiles
    sharded: bool
    source: Path | str | None = None  # the file, folder or URL the channel was read from

    def n_rows(self) -> int:
        """Rows of the whole channel, not of one worker's shard."""
        return self.files.n_rows()

    def bounds(self, rank: int, world_size: int) -> tuple[int, int]:
        """This worker's rows of the whole channel: [start, stop)."""
        n_rows = self.files.n_rows()
        return shard_bounds(n_rows, world_size, rank) if self.sharded else (0, n_rows)

    def read(self, rank: int, world_size: int) -> Table:
        return self.files.read_rows(*self.bounds(rank, world_size))


# A worker program is a module-level function, so it pickles by reference.
WorkerProgram = Callable[["WorkerContext"], None]


@dataclass(frozen=True)
class WorkerTask:
    job_id: str
    rank: int
    world_size: int
    program: WorkerProgram
    hyperparameters: BaseModel
    channels: Mapping[str, ChannelShard]
    model_dir: Path  # only rank 0 writes here; the controller publishes it on success
    log_path: Path
    rendezvous: Rendezvous
    seed: int
    # Appears when the controller wants the task to end at its next step. A file, not a
    # signal: a signal interrupts the collective's socket calls (EINTR) and breaks them.
    stop_file: Path | None = None
    distribution: DistributionSpec = field(default_factory=DistributionSpec)
    script: ScriptSpec | None = None  # algorithm "script": what to launch
    # With staging at a URL: model_dir is the worker's own temp folder, uploaded here after.
    model_url: str | None = None
    reporting_rank: int = 0  # whose reports count (one rank's only: the others would repeat)
    checkpoint: CheckpointPlan | None = None  # None: the job keeps no checkpoints
    attempt: int = 1
    # The controller's folder for this job, which it removes whatever happens: a worker's
    # temp files go there when it can see it (same machine), so a killed worker leaves none.
    scratch: Path | None = None
    # Workers that may train at once on this machine (a tuning job's parallel trials, all
    # their workers); None: this job's own workers alone. Sets `WorkerContext.threads`.
    concurrent_workers: int | None = None
    # An elastic job: attempts may run at other sizes, so positions in the data must hold at
    # any world size (the DNN walks one order of the whole channel).
    elastic: bool = False
    # What this worker runs on, as the job's cluster.capacity says of its rank (Ray places a
    # spot worker on a node with the `spot` resource).
    capacity: CapacityClass = CapacityClass.ON_DEMAND
    # Steps whose report the reporting rank holds the program at until the controller judged
    # it (a tuning trial's rungs): a stop decided there lands there, however busy the
    # machine, so a tuning job's decisions hang on its reports alone.
    judged_steps: frozenset[int] = frozenset()


class WorkerContext:
    """What a worker program sees: its rank, its data, and one call to report metrics."""

    def __init__(
        self,
        task: WorkerTask,
        send: Callable[[WorkerEvent], None],
        signals: ControllerSignals | None = None,
    ) -> None:
        self.task = task
        self._send = send
        # Ray's actor where a backend's workers cannot see the stop file.
        self._signals = signals or FileSignals(task.stop_file)
        self.stop_seen = False  # stop_requested() said yes: the program may end unfinished
        plan = task.checkpoint
        self._reported_step = None if plan is None else plan.resume_reported_step
        self.checkpoints = (
            None
            if task.checkpoint is None
            else WorkerCheckpoints(task.checkpoint, task.rank, send, lambda: self._reported_step)
        )

    def stop_requested(self) -> bool:
        """The controller asks this task to end at its next step (early stopping, a stop, the
        time limit). Programs that check it end cleanly, save what they have, and their
        workers stay warm; programs that do not are killed after a grace period."""
        asked = self._asked() is not None
        self.stop_seen = self.stop_seen or asked
        return asked

    def stop_goes_on(self) -> bool:
        """Whether the stop asked is one the job goes on from, in a new attempt from the
        checkpoint saved as it stops (a resize, a preemption notice, a tuner's pause): the
        program need not finish its model (the DNN skips its test evaluation)."""
        return self._asked() == GOES_ON

    def _asked(self) -> str | None:
        """None while no stop is asked; else its kind ("" to end, GOES_ON)."""
        return self._signals.stop()

    @property
    def rank(self) -> int:
        return self.task.rank

    @property
    def world_size(self) -> int:
        return self.task.world_size

    @property
    def is_chief(self) -> bool:
        return self.task.rank == 0

    @property
    def model_dir(self) -> Path:
        return self.task.model_dir

    @property
    def threads(self) -> int:
        """Threads for the program's math (torch, XGBoost): this machine's cores shared among
        the workers that train on it at once. More threads than cores make OpenMP's threads
        wait on each other: trials that oversubscribe the cores so run several times slower
        (benchmarks/results/parallel_threads.md)."""
        sharing = self.task.concurrent_workers or self.task.world_size
        return max(1, (os.cpu_count() or 1) // sharing)

    def channel(self, name: str) -> Table | None:
        shard = self.task.channels.get(name)
        return None if shard is None else shard.read(self.rank, self.world_size)

    def report(self, step: int, **metrics: float) -> None:
        """Send metrics for `step`; only one rank's reports count (rank 0's unless the job
        names another), since the others would repeat them."""
        if self.rank != self.task.reporting_rank:
            return
        self._reported_step = step
        finite = {name: float(value) for name, value in metrics.items() if math.isfinite(value)}
        rejected = {name: str(float(metrics[name])) for name in metrics.keys() - finite.keys()}
        for name, text in rejected.items():
            print(
                f"scaletune: dropped non-finite metric {name}={text} at step {step}",
                file=sys.stderr,
                flush=True,
            )
        # Rejected values are recorded as such, never as metric points: a NaN objective must
        # not reach a tuner's comparisons.
        self._send(Report(self.rank, step, finite, time.time(), rejected))
        if step in self.task.judged_steps:
            await_verdict(self._signals, step)
