"""Data-parallel training with PyTorch DDP: every step's gradients averaged by all-reduce."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from scaletune.worker import WorkerContext

from ._checkpoint import STATE_FILE, Position, pack, rank_state, unpack
from ._common import (
    LossTally,
    backward,
    make_optimizer,
    micro_batch_loss,
    restore_optimizer,
    set_learning_rate,
)
from ._gns import GradientNoiseScale
from ._run import DNNRun
from ._schedule import LearningRateSchedule

# Ranks agree on stopping every this many updates (one tiny all-reduce), and at each epoch's end.
STOP_CHECK_UPDATES = 20


def train_allreduce(run: DNNRun) -> tuple[nn.Module, int]:
    """Returns the trained model and the number of epochs run."""
    if run.ctx.world_size == 1:
        return _train(run)
    with _process_group(run):
        # DDP is freed when _train returns, while the process group still exists.
        return _train(run)


@contextlib.contextmanager
def _process_group(run: DNNRun) -> Iterator[None]:
    rendezvous = run.ctx.task.rendezvous
    dist.init_process_group(
        "nccl" if run.device.type == "cuda" else "gloo",
        init_method=f"tcp://{rendezvous.master_addr}:{rendezvous.master_port}",
        rank=run.ctx.rank,
        world_size=run.ctx.world_size,
        # Also how long a collective waits on a peer: a hung one fails the attempt, retried.
        timeout=timedelta(seconds=rendezvous.collective_timeout_seconds),
    )
    yield
    # Only after a clean end (after an error the group is killed anyway). Gloo's worker
    # thread may still hold the last reference to a tensor Python handed it; dropping it
    # needs the GIL. The barrier waits with the GIL released, so that thread finishes before
    # the group's destructor joins it (which happens with the GIL held: a deadlock otherwise).
    dist.barrier()
    dist.destroy_process_group()


def _average_and_measure(model: nn.Module, world_size: int) -> tuple[float, float]:
    """All-reduce the local gradients by hand (DDP was told not to), returning the squared
    norms before and after: this worker's gradient and the average over all workers."""
    parameters = list(model.parameters())
    for parameter in parameters:
        if parameter.grad is None:  # every rank must send the same layout
            parameter.grad = torch.zeros_like(parameter)
    flat = torch.cat([p.grad.reshape(-1) for p in parameters if p.grad is not None])
    local = float(flat.pow(2).sum())
    dist.all_reduce(flat)
    flat /= world_size
    offset = 0
    for parameter in parameters:
        assert parameter.grad is not None
        size = parameter.numel()
        parameter.grad.copy_(flat[offset : offset + size].view_as(parameter))
        offset += size
    return local, float(flat.pow(2).sum())


def _train(run: DNNRun) -> tuple[nn.Module, int]:
    ctx, hyperparameters, plan = run.ctx, run.hyperparameters, run.plan
    world_size = ctx.world_size
    model = run.new_model()
    wrapped: nn.Module = model
    noise: GradientNoiseScale | None = None
    # Sampled every few updates: the estimates are smoothed over many steps anyway.
    sample_every = hyperparameters.gns_every_updates
    if world_size > 1 and sample_every > 0:
        local_batch = hyperparameters.batch_size * hyperparameters.gradient_accumulation_steps
        noise = GradientNoiseScale(local_batch, local_batch * world_size)
    optimizer = make_optimizer(model.parameters(), hyperparameters)
    position, tally = _resume(run, model, optimizer, noise)
    if world_size > 1:  # after loading: DDP broadcasts rank 0's weights to the others
        ddp = DistributedDataParallel(model)
        wrapped = ddp
    schedule = LearningRateSchedule.for_job(hyperparameters, world_size, plan.updates_per_epoch)
    update, epoch = position.update, position.epoch
    for epoch in range(position.epoch, hyperparameters.epochs + 1):
        skip = position.index if epoch == position.epoch else 0
        tally = tally if epoch == position.epoch else LossTally()
        agreed_stop = False
        updates = itertools.islice(enumerate(plan.updates(run.train, epoch)), skip, None)
        for index, micro_batches in updates:
            set_learning_rate(optimizer, schedule.at(update))
            # A sampling update keeps every gradient local and averages it by hand, to see
            # the norm before and after; the others go through DDP's own (C++) all-reduce.
            measuring = noise is not None and (update + 1) % sample_every == 0
            for position_in_update, rows in enumerate(micro_batches):
                # Gradients of all but the last micro-batch stay local (summed in .grad).
                last = position_in_update == len(micro_batches) - 1
                syncs = world_size == 1 or (last and not measuring)
                with contextlib.nullcontext() if syncs else ddp.no_sync():
                    loss = micro_batch_loss(wrapped, run.train, rows, len(micro_batches))
                    backward(loss)
                tally.add(float(loss.detach()) * len(micro_batches) * len(rows), len(rows))
            if noise is not None and measuring:
                noise.update(*_average_and_measure(model, world_size))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            update += 1
            checking = (index + 1) % STOP_CHECK_UPDATES == 0
            stop, by_time = _agree(ctx) if checking else (False, False)
            checkpoints = ctx.checkpoints
            if checkpoints is not None and (stop or by_time or checkpoints.step_due(update)):
                here = Position(epoch, index + 1, update)
                _save(run, model, optimizer, here, tally, noise)
            if stop:
                agreed_stop = True
                break
        totals = _sum_over_ranks(
            [float(agreed_stop or ctx.stop_requested()), tally.total, tally.examples],
            world_size,
        )
        metrics = {"train:loss": totals[1] / max(totals[2], 1.0)}
        if noise is not None and noise.b_simple is not None:
            metrics["gns:b_simple"] = noise.b_simple
        if not agreed_stop:  # a partial epoch is not reported as if it were whole
            run.end_epoch(epoch, model, metrics)
        if totals[0] > 0:
            if not agreed_stop and ctx.checkpoints is not None:  # stopped at the epoch's end
                _save(run, model, optimizer, Position(epoch + 1, 0, update), LossTally(), noise)
            break
    return model, epoch


def _agree(ctx: WorkerContext) -> tuple[bool, bool]:
    """Whether to stop, and whether a checkpoint is due by the clock: every rank's answer
    summed (one tiny all-reduce), so that all take the same branch."""
    by_time = ctx.checkpoints is not None and ctx.checkpoints.time_due()
    stop, due = _sum_over_ranks([float(ctx.stop_requested()), float(by_time)], ctx.world_size)
    return stop > 0, due > 0


def _resume(
    run: DNNRun,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    noise: GradientNoiseScale | None,
) -> tuple[Position, LossTally]:
    """Every rank loads the checkpoint this attempt starts from, if any."""
    checkpoints = run.ctx.checkpoints
    if checkpoints is None or checkpoints.resume_step is None:
        return Position.start(), LossTally()
    state = unpack(checkpoints.load()[STATE_FILE])
    model.load_state_dict(state["model"])
    restore_optimizer(optimizer, state["optimizer"])
    mine = state["ranks"][run.ctx.rank]
    if noise is not None and mine["noise"] is not None:
        noise._true_sq, noise._trace = mine["noise"]
    torch.set_rng_state(mine["torch_rng"])
    return Position(**state["position"]), LossTally(mine["loss_total"], mine["loss_examples"])


def _save(
    run: DNNRun,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    position: Position,
    tally: LossTally,
    noise: GradientNoiseScale | None,
) -> None:
    """Called by every rank at the same update: rank 0 gathers the others' parts and saves."""
    ctx = run.ctx
    mine = rank_state(tally.total, tally.examples, noise)
    ranks: list[dict[str, Any] | None] = [mine]
    if ctx.world_size > 1:
        ranks = [None] * ctx.world_size
        dist.all_gather_object(ranks, mine)
    if ctx.is_chief and ctx.checkpoints is not None:
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "position": dataclasses.asdict(position),
            "ranks": ranks,
        }
        ctx.checkpoints.save(position.update, {STATE_FILE: pack(state)})


def _any_rank(flag: bool) -> bool:
    return (
        _sum_over_ranks([float(flag)], dist.get_world_size() if dist.is_initialized() else 1)[0] > 0
    )


def _sum_over_ranks(values: list[float], world_size: int) -> list[float]:
    if world_size == 1:
        return values
    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor)
    return [float(value) for value in tensor]
