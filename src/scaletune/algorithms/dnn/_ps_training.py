"""Data-parallel training through the parameter server: rank 0 hosts it and also trains;
every worker computes gradients on its shard, pushes them, and trains on the weights it gets
back."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import vector_to_parameters

from ._common import backward, make_optimizer, micro_batch_loss
from ._parameter_server import ParameterServer, ParameterServerClient
from ._run import DNNRun
from ._schedule import LearningRateSchedule


def train_parameter_server(
    run: DNNRun, *, synchronous: bool, staleness_bound: int | None
) -> tuple[nn.Module, int]:
    """Train through a parameter server hosted by rank 0; returns the final model (the
    server's weights, on rank 0) and the number of epochs run."""
    ctx, hyperparameters, plan = run.ctx, run.hyperparameters, run.plan
    rendezvous = ctx.task.rendezvous
    authkey = f"scaletune:{ctx.task.job_id}".encode()
    server: ParameterServer | None = None
    if ctx.is_chief:
        server_model = run.new_model().cpu()
        # Asynchronously every worker's push is an update of its own: N per worker step.
        updates_per_epoch = plan.updates_per_epoch * (1 if synchronous else ctx.world_size)
        server = ParameterServer(
            server_model,
            make_optimizer(server_model.parameters(), hyperparameters),
            LearningRateSchedule.for_job(hyperparameters, ctx.world_size, updates_per_epoch),
            world_size=ctx.world_size,
            synchronous=synchronous,
            staleness_bound=staleness_bound,
            host=rendezvous.master_addr,
            port=rendezvous.master_port,
            authkey=authkey,
        )
    try:
        client = ParameterServerClient(
            rendezvous.master_addr, rendezvous.master_port, authkey, ctx.rank
        )
        try:
            model = run.new_model().cpu()
            scoring_model = run.new_model().cpu() if server is not None else None
            stop = client.pull_initial(model)
            epoch = 0
            while not stop and epoch < hyperparameters.epochs:
                epoch += 1
                pushed = 0
                for micro_batches in plan.updates(run.train, epoch):
                    model.zero_grad(set_to_none=True)
                    loss_sum, examples = 0.0, 0
                    for rows in micro_batches:
                        loss = micro_batch_loss(model, run.train, rows, len(micro_batches))
                        backward(loss)
                        loss_sum += float(loss.detach()) * len(micro_batches) * len(rows)
                        examples += len(rows)
                    stop = client.push(model, loss_sum, examples, ctx.stop_requested())
                    pushed += 1
                    if stop:
                        break
                # A partial epoch is not reported as if it were whole.
                whole_epoch = pushed == plan.updates_per_epoch
                if server is not None and scoring_model is not None and whole_epoch:
                    _load(scoring_model, server.snapshot())
                    run.end_epoch(epoch, scoring_model, server.take_statistics().metrics())
            client.done()
        finally:
            client.close()
        if server is not None:
            server.wait_until_all_done()
            _load(model, server.snapshot())
        return model, epoch
    finally:
        if server is not None:
            server.close()


def _load(model: nn.Module, values: torch.Tensor) -> None:
    with torch.no_grad():
        vector_to_parameters(values, model.parameters())
