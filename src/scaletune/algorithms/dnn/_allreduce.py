"""Data-parallel training with PyTorch DDP: every step's gradients averaged by all-reduce."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from scaletune.gradient_noise import GradientNoiseScale
from scaletune.torch import FoldedNorms, MicroBatchNorms
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
from ._pace import (
    Pace,
    estimate_every,
    estimates_noise,
    is_adaptive,
    measures_noise,
    noise_estimate,
    pace_for,
)
from ._run import DNNRun

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


def _noise_estimate(run: DNNRun) -> GradientNoiseScale | None:
    """The noise estimates, where AdaScale or the noise scale wants them."""
    if estimate_every(run.hyperparameters) == 0:
        return None
    return noise_estimate(run.hyperparameters, run.ctx.world_size)


def _norms(
    run: DNNRun, model: nn.Module, noise: GradientNoiseScale | None
) -> MicroBatchNorms | FoldedNorms | None:
    """Where the noise is measured: each worker's one micro-batch in DDP's own all-reduce
    (no collective of its own), else hooks on each micro-batch and one more all-reduce."""
    if noise is None:
        return None
    if run.ctx.world_size > 1 and run.hyperparameters.gradient_accumulation_steps == 1:
        return FoldedNorms()
    return MicroBatchNorms(model, run.hyperparameters.gradient_accumulation_steps)


def _measure(
    norms: MicroBatchNorms | FoldedNorms,
    noise: GradientNoiseScale,
    world_size: int,
    estimating: bool,
) -> None:
    """After an update's backward passes: its norms pooled, and the estimates updated where
    due (every rank at the same updates)."""
    if isinstance(norms, FoldedNorms):
        pooled = norms.end_update()  # summed in DDP's last bucket
    else:
        pooled = norms.end_update(estimating, world_size)  # the same on every rank
    if pooled is not None:
        noise.add(pooled)


def _train(run: DNNRun) -> tuple[nn.Module, int]:
    """Returns the model and the epoch it ended in (the last one reported, or the one under
    way when a stop cut it short)."""
    ctx, hyperparameters, plan = run.ctx, run.hyperparameters, run.plan
    world_size = ctx.world_size
    model = run.new_model()
    noise = _noise_estimate(run)
    norms = _norms(run, model, noise)
    optimizer = make_optimizer(model.parameters(), hyperparameters)
    position, tally = _resume(run, model, optimizer, noise, norms)
    # After loading: DDP broadcasts rank 0's weights to the others.
    ddp = DistributedDataParallel(model) if world_size > 1 else None
    if isinstance(norms, FoldedNorms) and ddp is not None:
        norms.register(ddp)
    wrapped: nn.Module = model if ddp is None else ddp
    pace = pace_for(hyperparameters, world_size, plan.train_rows, plan.updates_per_epoch)
    update, progress = position.update, position.progress_or_update
    if plan.elastic and not is_adaptive(hyperparameters):
        # Updates at another size took other batches: the schedule goes on from the data
        # behind the position, in this size's updates.
        progress = plan.epochs_done(position) * plan.updates_per_epoch
    reached = pace.reached(position)
    while reached < pace.epochs:
        epoch = position.epoch
        for index, micro_batches, seen in plan.walk(run.train, position):
            measuring = norms is not None and measures_noise(hyperparameters, update)
            estimating = measuring and estimates_noise(hyperparameters, update)
            if isinstance(norms, MicroBatchNorms):
                norms.active = measuring
            elif norms is not None:
                norms.measuring, norms.estimating = measuring, estimating
            for position_in_update, rows in enumerate(micro_batches):
                # Gradients of all but the last micro-batch stay local (summed in .grad).
                last = position_in_update == len(micro_batches) - 1
                with contextlib.nullcontext() if ddp is None or last else ddp.no_sync():
                    loss = micro_batch_loss(wrapped, run.train, rows, len(micro_batches))
                    backward(loss)
                tally.add(float(loss.detach()) * len(micro_batches) * len(rows), len(rows))
            if measuring and noise is not None and norms is not None:
                _measure(norms, noise, world_size, estimating)
            scale = pace.scale(progress, noise)
            set_learning_rate(optimizer, pace.schedule.rate(progress, scale))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            update += 1
            progress = pace.advance(progress, scale)
            here = plan.close(pace.at(epoch, index + 1, update, progress), seen)
            closing = pace.reached(here) > reached
            if closing:
                reached = pace.reached(here)
                stop, by_time = _close_epoch(run, model, here, tally, noise, pace)
                tally = LossTally()
            elif (index + 1) % STOP_CHECK_UPDATES == 0:
                stop, by_time = _agree(ctx)
            else:
                stop = by_time = False
            checkpoints = ctx.checkpoints
            if checkpoints is not None and (stop or by_time or checkpoints.step_due(update)):
                _save(run, model, optimizer, here, tally, noise, norms)
            if stop:  # mid-epoch, the epoch under way is not reported as if it were whole
                return model, reached if closing else reached + 1
            position = here
            if reached >= pace.epochs or here.epoch != epoch:
                break
        else:  # an epoch with nothing left in it (resumed at its very end)
            position = dataclasses.replace(position, epoch=epoch + 1, index=0, examples=0)
    return model, reached


def _close_epoch(
    run: DNNRun,
    model: nn.Module,
    here: Position,
    tally: LossTally,
    noise: GradientNoiseScale | None,
    pace: Pace,
) -> tuple[bool, bool]:
    """Every rank at the same update: the epoch's loss summed over the ranks and reported.
    Returns, as `_agree` does, whether to stop and whether a checkpoint is due by the clock."""
    ctx = run.ctx
    by_time = ctx.checkpoints is not None and ctx.checkpoints.time_due()
    stop, due, total, examples = _sum_over_ranks(
        [float(ctx.stop_requested()), float(by_time), tally.total, tally.examples],
        ctx.world_size,
    )
    metrics = {"train:loss": total / max(examples, 1.0)}
    if noise is not None and noise.b_simple is not None:
        metrics["gns:b_simple"] = noise.b_simple
    metrics |= pace.metrics(here, noise, run.plan.updates_per_epoch)
    run.end_epoch(pace.reached(here), model, metrics)
    if pace.reached(here) in ctx.task.judged_steps:
        # Rank 0 waited in its report for the tuner's verdict: agree on it at the rung's
        # epoch, not some updates into the next one.
        judged_stop, judged_due = _agree(ctx)
        return stop > 0 or judged_stop, due > 0 or judged_due
    return stop > 0, due > 0


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
    norms: MicroBatchNorms | FoldedNorms | None,
) -> tuple[Position, LossTally]:
    """Every rank loads the checkpoint this attempt starts from, if any."""
    checkpoints = run.ctx.checkpoints
    if checkpoints is None or checkpoints.resume_step is None:
        return Position.start(), LossTally()
    state = unpack(checkpoints.load()[STATE_FILE])
    model.load_state_dict(state["model"])
    restore_optimizer(optimizer, state["optimizer"])
    ranks = state["ranks"]
    rank = run.ctx.rank
    # Saved at another size (an elastic job resized): a rank new to the job starts from rank
    # 0's estimates and RNG, and rank 0 carries the epoch's loss so far for every old rank.
    mine = ranks[rank] if rank < len(ranks) else ranks[0]
    if noise is not None:
        noise.restore(mine["noise"])
    if norms is not None and len(ranks) == run.ctx.world_size:  # at another size: afresh
        norms.pool.restore(mine.get("pooled"))  # a checkpoint from before pooling: none
    torch.set_rng_state(mine["torch_rng"])
    tally = LossTally(mine["loss_total"], mine["loss_examples"])
    if len(ranks) != run.ctx.world_size:
        tally = (
            LossTally(
                sum(part["loss_total"] for part in ranks),
                sum(part["loss_examples"] for part in ranks),
            )
            if rank == 0
            else LossTally()
        )
    return Position(**state["position"]), tally


def _save(
    run: DNNRun,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    position: Position,
    tally: LossTally,
    noise: GradientNoiseScale | None,
    norms: MicroBatchNorms | FoldedNorms | None,
) -> None:
    """Called by every rank at the same update: rank 0 gathers the others' parts and saves."""
    ctx = run.ctx
    mine = rank_state(tally.total, tally.examples, noise, None if norms is None else norms.pool)
    ranks: list[dict[str, Any] | None] = [mine]
    if ctx.world_size > 1:
        ranks = [None] * ctx.world_size
        dist.all_gather_object(ranks, mine)
    if ctx.checkpoints is None:
        return
    if not ctx.is_chief:
        ctx.checkpoints.saved_by_another_rank()
        return
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "position": dataclasses.asdict(position),
        "ranks": ranks,
    }
    ctx.checkpoints.save(position.update, {STATE_FILE: pack(state)})


def _sum_over_ranks(values: list[float], world_size: int) -> list[float]:
    if world_size == 1:
        return values
    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor)
    return [float(value) for value in tensor]
