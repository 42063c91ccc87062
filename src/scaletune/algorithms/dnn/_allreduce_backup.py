"""All-reduce training with backup workers: each update is a round (`_backup_rounds`) that
averages the first N - b gradients computed on its weights, so a slow rank does not hold it.

A rank walks its shard at its own speed; a rank behind skips the rounds that filled without
it and computes on the newest weights. As with the parameter server's backup workers, a round
counts in the job's progress as the share of a whole round it applied ((N - b) / N), its
learning rate is the scaling rule's for N - b gradients, and an epoch closes when the
gradients applied add up to a pass over the data (`AppliedPace`). Which gradients a round
takes depends on timing, so a resumed attempt is not bit-for-bit the run it continues; each
rank does go on from its own place in its shard. No gradient noise scale is reported: a
round's gradients are not one batch drawn from every shard."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ._backup_rounds import BackupRounds, Contribution, RoundResult, ShardPlace
from ._checkpoint import STATE_FILE, Position, pack, rank_state, unpack
from ._common import (
    LossTally,
    accumulate_gradients,
    make_optimizer,
    restore_optimizer,
    set_learning_rate,
)
from ._pace import AppliedPace, pace_for
from ._run import DNNRun

DROPPED_METRIC = "allreduce:dropped"


@dataclass(frozen=True)
class _Stores:
    """Two more connections to the job's store: the training thread claims on one while the
    round thread waits on the other."""

    claims: dist.Store
    waits: dist.Store


def train_allreduce_with_backups(run: DNNRun) -> tuple[nn.Module, int]:
    """Returns the trained model (the same on every rank) and the epoch it ended in."""
    ctx, hyperparameters, plan = run.ctx, run.hyperparameters, run.plan
    world_size = ctx.world_size
    needed = world_size - ctx.task.distribution.backup_workers
    share = needed / world_size
    fixed = pace_for(hyperparameters, needed, plan.train_rows, plan.updates_per_epoch)
    pace = AppliedPace(fixed.schedule, fixed.epochs, plan.updates_per_epoch)
    model = run.new_model()  # the same weights on every rank (one seed)
    optimizer = make_optimizer(model.parameters(), hyperparameters)
    position, place = _resume(run, model, optimizer)
    parameters = list(model.parameters())
    with _process_group(run) as stores:
        rounds = BackupRounds(
            claims=stores.claims,
            waits=stores.waits,
            reduce=dist.all_reduce,
            rank=ctx.rank,
            world_size=world_size,
            needed=needed,
            size=sum(parameter.numel() for parameter in parameters),
            first=position.update,
            end=_rounds_to_finish(pace, position, share),
            timeout=timedelta(seconds=ctx.task.rendezvous.collective_timeout_seconds),
            place=place,
        )
        batches = _batches(run, place)
        update, progress = position.update, position.progress_or_update
        reached, tally, dropped = pace.reached(position), LossTally(), 0
        with rounds:
            while not pace.finished(Position(1, 0, update, progress)):
                if not rounds.taken_without_this_rank(update):
                    place, micro_batches = next(batches)
                    contribution = _gradient(run, model, micro_batches)
                    checkpoints = ctx.checkpoints
                    rounds.note(
                        stop=ctx.stop_requested(),
                        checkpoint_due=checkpoints is not None and checkpoints.time_due(),
                        place=place,
                    )
                    rounds.offer(update, contribution)
                result = rounds.result(update)
                if result is None:  # a stop ended the rounds before this one
                    break
                scale = pace.scale(progress, None)
                _apply(model, optimizer, result, pace.schedule.rate(progress, scale))
                update, progress = update + 1, pace.advance(progress, scale, share)
                tally.add(result.loss_sum, result.examples)
                dropped += result.dropped
                here = Position(result.places[0].epoch, result.places[0].index, update, progress)
                closing = pace.reached(here) > reached
                if closing:
                    reached = pace.reached(here)
                    metrics = {"train:loss": tally.mean, DROPPED_METRIC: float(dropped)}
                    run.end_epoch(reached, model, metrics)
                    tally, dropped = LossTally(), 0
                if result.stop or result.checkpoint_due or _step_due(run, update):
                    _save(run, model, optimizer, here, result.places)
                if result.stop:  # mid-epoch, the epoch under way is not reported as if whole
                    return model, reached if closing else reached + 1
    return model, reached


@contextlib.contextmanager
def _process_group(run: DNNRun) -> Iterator[_Stores]:
    """The job's store (rank 0 serves it at the rendezvous) and a gloo group on it: the
    rounds' collectives run on a thread, on the CPU, whatever the device."""
    ctx = run.ctx
    rendezvous = ctx.task.rendezvous
    timeout = timedelta(seconds=rendezvous.collective_timeout_seconds)
    host, port = rendezvous.master_addr, rendezvous.master_port

    def connect(is_master: bool = False) -> dist.Store:
        # The group's set-up waits for every rank; the server need not count them itself.
        return dist.TCPStore(
            host, port, ctx.world_size, is_master, timeout=timeout, wait_for_workers=False
        )

    store = connect(is_master=ctx.is_chief)
    dist.init_process_group(
        "gloo",
        store=dist.PrefixStore("group", store),
        rank=ctx.rank,
        world_size=ctx.world_size,
        timeout=timeout,
    )
    yield _Stores(dist.PrefixStore("rounds", connect()), dist.PrefixStore("rounds", connect()))
    # As `_allreduce._process_group`: the barrier lets gloo's thread drop its last tensor
    # before the group's destructor joins it.
    dist.barrier()
    dist.destroy_process_group()


def _rounds_to_finish(pace: AppliedPace, position: Position, share: float) -> int:
    """The round after which the job's progress is made: every rank counts the same, with
    the same additions as the training loop."""
    update, progress = position.update, position.progress_or_update
    while not pace.finished(Position(1, 0, update, progress)):
        update, progress = update + 1, pace.advance(progress, 1.0, share)
    return update


def _batches(run: DNNRun, place: ShardPlace) -> Iterator[tuple[ShardPlace, list[torch.Tensor]]]:
    """This rank's updates, epoch after epoch of its shard, each with the place after it:
    the job ends by the rounds applied, not by a rank's passes."""
    for epoch in itertools.count(place.epoch):
        skip = place.index if epoch == place.epoch else 0
        updates = itertools.islice(run.plan.updates(run.train, epoch), skip, None)
        for index, micro_batches in enumerate(updates, start=skip + 1):
            yield ShardPlace(epoch, index), micro_batches


def _gradient(run: DNNRun, model: nn.Module, micro_batches: list[torch.Tensor]) -> Contribution:
    loss_sum, examples = accumulate_gradients(model, run.train, micro_batches)
    flat = torch.cat(
        [
            torch.zeros(p.numel()) if p.grad is None else p.grad.detach().reshape(-1).cpu()
            for p in model.parameters()
        ]
    )
    return Contribution(flat.float(), loss_sum, examples)


def _apply(
    model: nn.Module, optimizer: torch.optim.Optimizer, result: RoundResult, lr: float
) -> None:
    """Every rank takes the same step: the round's mean gradient, this rank's optimiser."""
    offset = 0
    for parameter in model.parameters():
        count = parameter.numel()
        part = result.mean[offset : offset + count].view_as(parameter)
        parameter.grad = part.to(device=parameter.device, dtype=parameter.dtype)
        offset += count
    set_learning_rate(optimizer, lr)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _step_due(run: DNNRun, update: int) -> bool:
    checkpoints = run.ctx.checkpoints
    return checkpoints is not None and checkpoints.step_due(update)


def _resume(
    run: DNNRun, model: nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[Position, ShardPlace]:
    """Every rank loads the checkpoint, if any: the weights, the optimiser, the round, and
    its own place in its shard (rank 0's where the checkpoint has no place for it)."""
    checkpoints = run.ctx.checkpoints
    if checkpoints is None or checkpoints.resume_step is None:
        return Position.start(), ShardPlace(1, 0)
    state = unpack(checkpoints.load()[STATE_FILE])
    model.load_state_dict(state["model"])
    restore_optimizer(optimizer, state["optimizer"])
    torch.set_rng_state(state["ranks"][0]["torch_rng"])
    position = Position(**state["position"])
    places = [ShardPlace(**place) for place in state.get("places", [])]
    rank = run.ctx.rank
    return position, places[rank] if rank < len(places) else ShardPlace(
        position.epoch, position.index
    )


def _save(
    run: DNNRun,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    position: Position,
    places: tuple[ShardPlace, ...],
) -> None:
    """Rank 0 saves alone: the weights and the optimiser are the same on every rank, and the
    round brought every rank's place."""
    checkpoints = run.ctx.checkpoints
    if checkpoints is None:
        return
    if not run.ctx.is_chief:
        checkpoints.saved_by_another_rank()
        return
    state: dict[str, Any] = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "position": dataclasses.asdict(position),
        # The format of `_allreduce`'s checkpoints (a job may go on in the other mode).
        "ranks": [rank_state(0.0, 0, None)],
        "places": [dataclasses.asdict(place) for place in places],
    }
    checkpoints.save(position.update, {STATE_FILE: pack(state)})
