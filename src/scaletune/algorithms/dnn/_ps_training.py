"""Data-parallel training through the parameter server: rank 0 hosts it and also trains;
every worker computes gradients on its shard, pushes them, and trains on the weights it gets
back."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import torch
from torch import nn
from torch.nn.utils import vector_to_parameters

from scaletune.torch import MicroBatchNorms
from scaletune.worker import WorkerContext

from ._checkpoint import STATE_FILE, Position, pack, unpack
from ._common import accumulate_gradients, make_optimizer
from ._pace import AppliedPace, FixedPace, is_adaptive, noise_estimate, pace_for
from ._parameter_server import ParameterServer
from ._ps_client import ParameterServerClient
from ._ps_modes import ServerMode, Synchronous
from ._ps_updates import ServerUpdates
from ._run import DNNRun
from ._staleness import AsyncRemedies


def train_parameter_server(run: DNNRun, mode: ServerMode) -> tuple[nn.Module, int]:
    """Train through a parameter server hosted by rank 0; returns the final model (the
    server's weights, on rank 0) and the number of epochs run."""
    ctx, hyperparameters, plan = run.ctx, run.hyperparameters, run.plan
    rendezvous = ctx.task.rendezvous
    authkey = f"scaletune:{ctx.task.job_id}".encode()
    adaptive = is_adaptive(hyperparameters)
    # The server counts the epochs where a worker's passes over its shard do not measure
    # the job's progress: AdaScale's, asynchronous pushes, rounds that drop late gradients.
    server_paced = adaptive or mode.counts_epochs
    server: ParameterServer | None = None
    resumed = _resumed_state(run)
    position = Position.start() if resumed is None else Position(**resumed["position"])
    if ctx.is_chief:
        server_model = run.new_model().cpu()
        server = ParameterServer(
            server_model,
            _server_updates(run, server_model, mode),
            world_size=ctx.world_size,
            mode=mode,
            host=rendezvous.master_addr,
            port=rendezvous.master_port,
            authkey=authkey,
            resume=None if resumed is None else resumed["server"],
            worker_updates_per_epoch=run.plan.updates_per_epoch,
        )
    try:
        client = ParameterServerClient(
            rendezvous.master_addr,
            rendezvous.master_port,
            authkey,
            ctx.rank,
            reply_timeout=rendezvous.collective_timeout_seconds,
        )
        try:
            model = run.new_model().cpu()
            norms = None
            if adaptive:
                norms = MicroBatchNorms(model, hyperparameters.gradient_accumulation_steps)
                norms.active = True
            scoring_model = run.new_model().cpu() if server is not None else None
            stop = client.pull_initial(model)
            epoch, update = position.epoch - 1, position.update
            reported = server.reached() if server is not None and server_paced else epoch
            # Where the server counts, it says when the progress is made (a stop); passes
            # over the data go on until then.
            while not stop and (server_paced or epoch < hyperparameters.epochs):
                epoch += 1
                pushed = position.index if epoch == position.epoch else 0
                for micro_batches in itertools.islice(plan.updates(run.train, epoch), pushed, None):
                    loss_sum, examples = accumulate_gradients(model, run.train, micro_batches)
                    micro_sq = 0.0 if norms is None else norms.take()[0]
                    stop = client.push(model, loss_sum, examples, ctx.stop_requested(), micro_sq)
                    pushed += 1
                    update += 1
                    if server is not None and server_paced:
                        reported = _report_closed(run, server, scoring_model, reported)
                    if server is not None and _due(ctx, update, stop and not server.finished):
                        _save(ctx, server, Position(epoch, pushed, update))
                    if stop:
                        break
                # A partial epoch is not reported as if it were whole.
                whole_epoch = pushed == plan.updates_per_epoch
                if server is not None and not server_paced and whole_epoch:
                    _report(run, server, scoring_model, epoch)
            client.done()
        finally:
            client.close()
        if server is not None:
            server.wait_until_all_done()
            _load(model, server.snapshot())
        return model, reported if server_paced else epoch
    finally:
        if server is not None:
            server.close()


def _server_updates(run: DNNRun, model: nn.Module, mode: ServerMode) -> ServerUpdates:
    """The server's update rule, from the job's hyperparameters and `[distribution]`."""
    ctx, hyperparameters, plan = run.ctx, run.hyperparameters, run.plan
    distribution = ctx.task.distribution
    synchronous = isinstance(mode, Synchronous)
    # Asynchronously every worker's push is an update of its own: N per worker step.
    updates_per_epoch = plan.updates_per_epoch * (1 if synchronous else ctx.world_size)
    pace = pace_for(hyperparameters, ctx.world_size, plan.train_rows, updates_per_epoch)
    if mode.counts_epochs and isinstance(pace, FixedPace):
        pace = AppliedPace(pace.schedule, pace.epochs, updates_per_epoch)
    # The server measures AdaScale's gain alone; the noise scale is the all-reduce loop's.
    noise = (
        noise_estimate(hyperparameters, ctx.world_size) if is_adaptive(hyperparameters) else None
    )
    remedies = (
        None
        if synchronous
        else AsyncRemedies.of(distribution, hyperparameters.momentum, ctx.world_size)
    )
    optimizer = make_optimizer(model.parameters(), hyperparameters)
    return ServerUpdates(
        model,
        optimizer,
        pace,
        noise=noise,
        remedies=remedies,
        scaling=hyperparameters.lr_scaling,
    )


def _report(
    run: DNNRun,
    server: ParameterServer,
    scoring_model: nn.Module | None,
    epoch: int,
) -> None:
    """Rank 0 scores the server's weights and reports the epoch it passed over its shard."""
    assert scoring_model is not None
    _load(scoring_model, server.snapshot())
    run.end_epoch(epoch, scoring_model, server.take_statistics().metrics())


def _report_closed(
    run: DNNRun, server: ParameterServer, scoring_model: nn.Module | None, reported: int
) -> int:
    """Rank 0 scores and reports every epoch the server closed since it last looked, each on
    the weights it closed with; returns the last epoch reported (`reported` if none)."""
    assert scoring_model is not None
    for closed in server.take_closed_epochs():
        _load(scoring_model, closed.weights)
        run.end_epoch(closed.epoch, scoring_model, closed.statistics.metrics() | closed.progress)
        reported = closed.epoch
    return reported


def _resumed_state(run: DNNRun) -> dict[str, Any] | None:
    """Every rank reads where the checkpoint left off; rank 0 also restores the server."""
    checkpoints = run.ctx.checkpoints
    if checkpoints is None or checkpoints.resume_step is None:
        return None
    return unpack(checkpoints.load()[STATE_FILE])


def _due(ctx: WorkerContext, update: int, stop: bool) -> bool:
    """Rank 0 alone decides: the server's state (in its process) is the whole checkpoint.
    Synchronously the server is between two rounds when rank 0 has its reply, so the state
    is exactly that after `update` rounds; asynchronously it is a moment's state."""
    checkpoints = ctx.checkpoints
    if checkpoints is None:
        return False
    return stop or checkpoints.step_due(update) or checkpoints.time_due()


def _save(ctx: WorkerContext, server: ParameterServer, position: Position) -> None:
    if ctx.checkpoints is not None:
        state = {"server": server.state(), "position": dataclasses.asdict(position)}
        ctx.checkpoints.save(position.update, {STATE_FILE: pack(state)})


def _load(model: nn.Module, values: torch.Tensor) -> None:
    with torch.no_grad():
        vector_to_parameters(values, model.parameters())
