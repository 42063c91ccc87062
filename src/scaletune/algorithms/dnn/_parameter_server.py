"""A parameter server: workers push gradients and pull weights over authenticated sockets.

The server runs as threads inside rank 0's process, so it is part of the worker group and
dies with it. It holds the weights and the optimiser. Synchronously it waits for one gradient
from every worker (or the first N - b, with b backup workers), applies their mean and answers
all with the new weights (the same update as all-reduce). Asynchronously it applies each
gradient as it arrives and answers that worker alone, so workers compute on weights that
others have since changed: the staleness of an update is the number of updates applied
between the worker's pull and its push (`_ps_modes`). A wait on a late worker that lasts
`straggler_seconds` is said once in rank 0's log, naming the worker waited for."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector

from ._ps_modes import Asynchronous, ServerMode, Synchronous
from ._ps_updates import FloatVector, Pushed, ServerUpdates
from ._ps_wire import Abort, Done, Hello, ParameterServerError, Push, Weights, no_delay

ACCEPT_POLL_SECONDS = 0.2
STRAGGLER_SECONDS = 3.0  # a wait on one worker this long is said in the log


@dataclass
class EpochStatistics:
    """What the server saw since it was last asked: staleness of updates, training loss,
    gradients dropped for coming after their round (backup workers)."""

    staleness: list[int] = field(default_factory=list)
    loss_sum: float = 0.0
    examples: int = 0
    dropped: int = 0
    backup: bool = False  # whether `dropped` is reported

    def metrics(self) -> dict[str, float]:
        metrics = {}
        if self.examples:
            metrics["train:loss"] = self.loss_sum / self.examples
        if self.staleness:
            metrics["ps:staleness_mean"] = float(np.mean(self.staleness))
            metrics["ps:staleness_max"] = float(max(self.staleness))
        if self.backup:
            metrics["ps:dropped"] = float(self.dropped)
        return metrics


@dataclass(frozen=True)
class ClosedEpoch:
    """An epoch of the server's progress as it stood when it closed: its weights, what the
    server saw during it, and what the pace adds (AdaScale's gain, updates made)."""

    epoch: int
    weights: torch.Tensor
    statistics: EpochStatistics
    progress: dict[str, float]


class ParameterServer:
    def __init__(
        self,
        model: nn.Module,
        updates: ServerUpdates,
        *,
        world_size: int,
        mode: ServerMode,
        host: str,
        port: int,
        authkey: bytes,
        resume: dict[str, Any] | None = None,
        straggler_seconds: float = STRAGGLER_SECONDS,
        worker_updates_per_epoch: int = 1,
    ) -> None:
        """`updates` steps `model`'s weights. `resume`: a `state()` taken earlier, restored
        before any worker connects. `worker_updates_per_epoch`: one worker's updates in a
        pass over its shard (the pace's figures count data passes in them)."""
        self._model = model
        self._updates = updates
        self._world_size = world_size
        self._mode = mode
        self._straggler_seconds = straggler_seconds
        self._authkey = authkey
        self._state = threading.Condition()
        self._sent: dict[int, FloatVector] = {}  # the weights each rank computes on
        self._pending: dict[int, Push] = {}  # sync: this round's pushes, by rank
        self._round_stop = False
        self._stop = False
        # Pushes per worker still training; every rank counts from the start, so neither a
        # synchronous round nor the staleness bound goes ahead without a worker that is late.
        self._clocks: dict[int, int] = dict.fromkeys(range(world_size), 0)
        self._finished = 0
        self._failure: str | None = None
        self._statistics = self._fresh_statistics()
        self._worker_updates_per_epoch = worker_updates_per_epoch
        self._closed: list[ClosedEpoch] = []  # closed by the server, not yet taken by rank 0
        self._closing = False
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        if resume is not None:
            self._restore(resume)
        self._last_closed = updates.reached()
        self._listener = socket.create_server((host, port))
        self.port = int(self._listener.getsockname()[1])
        self._listener.settimeout(ACCEPT_POLL_SECONDS)
        self._start_thread(self._accept, "ps-accept")

    # Called by rank 0's training thread.
    def snapshot(self) -> torch.Tensor:
        with self._state:
            return parameters_to_vector(self._model.parameters()).detach().clone()

    def state(self) -> dict[str, Any]:
        """What a checkpoint needs of the server: weights, optimiser, version, statistics."""
        with self._state:
            return {
                "model": {k: v.clone() for k, v in self._model.state_dict().items()},
                **copy.deepcopy(self._updates.state()),
                "statistics": dataclasses.asdict(self._statistics),
            }

    def reached(self) -> int:
        """The last epoch of AdaScale's progress closed (0 with a fixed pace). Read by rank 0
        after its push came back: synchronously no round completes until it pushes again."""
        with self._state:
            return self._updates.reached()

    def take_closed_epochs(self) -> list[ClosedEpoch]:
        """The epochs of the server's progress closed since rank 0 last asked, oldest first.
        Other workers' pushes may close more than one while rank 0 computes a gradient
        (asynchronously, or in rounds that go on without it): each is kept as it closed."""
        with self._state:
            closed, self._closed = self._closed, []
            return closed

    @property
    def finished(self) -> bool:
        """AdaScale's progress is made: the job ends (every worker was told to stop)."""
        with self._state:
            return self._updates.finished

    def _restore(self, state: dict[str, Any]) -> None:
        self._model.load_state_dict(state["model"])
        self._updates.restore(state)
        self._statistics = EpochStatistics(**state["statistics"])

    def take_statistics(self) -> EpochStatistics:
        with self._state:
            statistics, self._statistics = self._statistics, self._fresh_statistics()
            return statistics

    def _fresh_statistics(self) -> EpochStatistics:
        backup = isinstance(self._mode, Synchronous) and self._mode.backup_workers > 0
        return EpochStatistics(backup=backup)

    def wait_until_all_done(self) -> None:
        """Rank 0 keeps serving until every worker said it is done (async: others lag)."""
        with self._state:
            self._state.wait_for(lambda: self._finished == self._world_size or self._failure)
            if self._failure:
                raise ParameterServerError(self._failure)

    def close(self) -> None:
        with self._state:
            self._closing = True
            if self._failure is None and self._finished < self._world_size:
                self._failure = "the parameter server (rank 0) shut down"
            self._state.notify_all()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a handler blocked in recv
        for thread in self._threads:
            thread.join(timeout=5)
        for sock in [self._listener, *self._sockets]:
            sock.close()

    # Server threads.
    def _start_thread(self, target: Any, name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        accepted = 0
        while accepted < self._world_size and not self._closing:
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(None)
            no_delay(sock)
            self._sockets.append(sock)
            self._start_thread(self._serve, f"ps-worker-{accepted}", sock)
            accepted += 1

    def _serve(self, sock: socket.socket) -> None:
        connection = Connection(os.dup(sock.fileno()))
        rank: int | None = None
        try:
            deliver_challenge(connection, self._authkey)
            answer_challenge(connection, self._authkey)
            hello = connection.recv()
            if not isinstance(hello, Hello):
                raise ParameterServerError(f"expected Hello, got {type(hello).__name__}")
            rank = hello.rank
            with self._state:
                weights = self._weights(rank, stop=self._stop)
            connection.send(weights)
            while True:
                message = connection.recv()
                if isinstance(message, Done):
                    self._leave(rank)
                    return
                connection.send(self._push(rank, message))
        except (EOFError, OSError, ParameterServerError) as exc:
            with self._state:
                if not self._closing and self._failure is None:
                    who = "a worker" if rank is None else f"worker {rank}"
                    self._failure = f"parameter server lost {who}: {type(exc).__name__}: {exc}"
                self._state.notify_all()
            with contextlib.suppress(OSError):
                connection.send(Abort(self._failure or "parameter server closed"))
        finally:
            connection.close()

    def _push(self, rank: int, push: Push) -> Weights | Abort:
        with self._state:
            self._stop = self._stop or push.stop_wanted
            if isinstance(self._mode, Synchronous):
                return self._push_sync(rank, push, self._mode)
            if self._updates.finished:  # the job's pushes are made: this one is not applied
                self._stop = True
                return self._reply_or_abort(rank)
            self._count(push)
            staleness = self._updates.version - push.version
            self._updates.apply_push(
                Pushed(
                    push.gradient,
                    staleness=staleness,
                    pulled=self._sent.get(rank),
                    loss_sum=push.loss_sum,
                    examples=push.examples,
                )
            )
            self._clocks[rank] += 1
            self._close_epochs()
            self._stop = self._stop or self._updates.finished
            if self._mode.max_staleness is not None:
                self._state.notify_all()
                self._wait_noting(
                    lambda: not self._held(rank) or bool(self._failure),
                    lambda: self._held_note(rank),
                )
            return self._reply_or_abort(rank)

    def _push_sync(self, rank: int, push: Push, mode: Synchronous) -> Weights | Abort:
        if push.version < self._updates.version:
            # Its round went on without it (a backup worker's): dropped, never applied late;
            # it computes its next gradient on the weights as they are now.
            self._statistics.dropped += 1
            return self._reply_or_abort(rank)
        self._pending[rank] = push
        round_started = self._updates.version
        self._complete_round_if_ready()
        self._wait_noting(
            lambda: self._updates.version > round_started or bool(self._failure),
            lambda: self._round_note(rank, mode),
        )
        if self._failure:
            return Abort(self._failure)
        return self._weights(rank, stop=self._round_stop)

    def _wait_noting(self, ready: Callable[[], bool], note: Callable[[], str | None]) -> None:
        """Wait (the lock held) until `ready`; past `straggler_seconds`, say once in the log
        whom the server waits for: a straggler shows where a job's time goes."""
        if self._state.wait_for(ready, timeout=self._straggler_seconds):
            return
        line = note()
        if line is not None:
            print(f"parameter server: {line}", file=sys.stderr, flush=True)
        self._state.wait_for(ready)

    def _held_note(self, rank: int) -> str:
        slowest = min(self._clocks, key=lambda other: self._clocks[other])
        return (
            f"worker {rank} waits at push {self._clocks[rank]} for worker {slowest}, at "
            f"{self._clocks[slowest]} pushes ({self._mode.describe()})"
        )

    def _round_note(self, rank: int, mode: Synchronous) -> str | None:
        if rank != min(self._pending, default=rank):  # one line a round, not one a worker
            return None
        missing = ", ".join(str(other) for other in sorted(self._clocks.keys() - self._pending))
        return (
            f"round {self._updates.version + 1} waits for worker {missing} "
            f"({len(self._pending)} of {mode.needed(len(self._clocks))} gradients in)"
        )

    def _complete_round_if_ready(self) -> None:
        assert isinstance(self._mode, Synchronous)
        if self._pending and len(self._pending) >= self._mode.needed(len(self._clocks)):
            # Counted with its round, not on arrival: a checkpoint taken between two rounds
            # must not hold part of the next one.
            for rank in sorted(self._pending):
                self._count(self._pending[rank])
            # Summed in rank order, so the result does not depend on arrival order.
            self._updates.apply_round(
                [
                    Pushed(self._pending[rank].gradient, micro_sq=self._pending[rank].micro_sq)
                    for rank in sorted(self._pending)
                ],
                of=self._world_size,
            )
            self._pending.clear()
            self._close_epochs()
            self._stop = self._stop or self._updates.finished
            self._round_stop = self._stop
            self._state.notify_all()

    def _close_epochs(self) -> None:
        """Keep each epoch the last update closed, with the weights it closed on."""
        reached = self._updates.reached()
        if reached <= self._last_closed:
            return
        weights = parameters_to_vector(self._model.parameters()).detach().clone()
        progress = self._updates.metrics(self._worker_updates_per_epoch)
        for epoch in range(self._last_closed + 1, reached + 1):
            statistics, self._statistics = self._statistics, self._fresh_statistics()
            self._closed.append(ClosedEpoch(epoch, weights, statistics, progress))
        self._last_closed = reached

    def _count(self, push: Push) -> None:
        self._statistics.loss_sum += push.loss_sum
        self._statistics.examples += push.examples
        self._statistics.staleness.append(self._updates.version - push.version)

    def _held(self, rank: int) -> bool:
        assert isinstance(self._mode, Asynchronous)
        return self._mode.holds(self._clocks[rank] - min(self._clocks.values()))

    def _leave(self, rank: int) -> None:
        with self._state:
            self._clocks.pop(rank, None)
            self._finished += 1
            if isinstance(self._mode, Synchronous):
                self._complete_round_if_ready()
            self._state.notify_all()

    def _weights(self, rank: int, *, stop: bool) -> Weights:
        values = parameters_to_vector(self._model.parameters()).detach().numpy().copy()
        if self._updates.keeps_pulled_weights:
            self._sent[rank] = values
        return Weights(self._updates.version, values, stop)

    def _reply_or_abort(self, rank: int) -> Weights | Abort:
        if self._failure:
            return Abort(self._failure)
        return self._weights(rank, stop=self._stop)
