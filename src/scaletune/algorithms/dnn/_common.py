"""What every synchronisation mode shares: tensors, optimiser, evaluation, epoch reports."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as functional
from torch import nn

from scaletune.data import Table

from ._batches import batches_per_epoch, epoch_batches
from ._checkpoint import Position
from ._hyperparameters import DNNHyperparameters, OptimizerName

EVAL_CHUNK = 4096


@dataclass(frozen=True)
class Examples:
    features: torch.Tensor
    labels: torch.Tensor

    @classmethod
    def of(cls, table: Table, device: torch.device) -> Examples:
        return cls(
            # Shards arrive as read-only copies of memory-mapped files; torch wants writable.
            torch.from_numpy(np.require(table.features, requirements="W")).to(device),
            torch.from_numpy(np.require(table.labels, requirements="W")).long().to(device),
        )

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True)
class Plan:
    """How one worker walks through its shard: batches, micro-batches and updates per epoch."""

    hyperparameters: DNNHyperparameters
    seed: int
    rank: int
    world_size: int
    train_rows: int  # of the whole channel, so every rank computes the same counts

    @property
    def batches_per_epoch(self) -> int:
        return batches_per_epoch(self.train_rows, self.world_size, self.hyperparameters.batch_size)

    @property
    def updates_per_epoch(self) -> int:
        return -(-self.batches_per_epoch // self.hyperparameters.gradient_accumulation_steps)

    @property
    def elastic(self) -> bool:
        """Whether positions in the data hold at any cluster size (`ElasticPlan`)."""
        return False

    def walk(
        self, shard: Examples, position: Position
    ) -> Iterator[tuple[int, list[torch.Tensor], int | None]]:
        """The rest of the position's epoch, update by update: its index in the epoch, its
        micro-batches, and (elastic plans) the examples the workers have trained on after it."""
        updates = itertools.islice(self.updates(shard, position.epoch), position.index, None)
        for index, micro_batches in enumerate(updates, start=position.index):
            yield index, micro_batches, None

    def close(self, position: Position, seen: int | None) -> Position:
        """The position after an update; one at the epoch's last update is the next's start."""
        if position.index >= self.updates_per_epoch:
            return dataclasses.replace(position, epoch=position.epoch + 1, index=0)
        return position

    def epochs_done(self, position: Position) -> float:
        """Epochs of data behind this position, fractions included."""
        return position.epoch - 1 + position.index / self.updates_per_epoch

    def updates(self, shard: Examples, epoch: int) -> Iterator[list[torch.Tensor]]:
        """Each update's micro-batches (row indices into the shard)."""
        accumulate = self.hyperparameters.gradient_accumulation_steps
        group: list[torch.Tensor] = []
        for rows in epoch_batches(
            len(shard),
            self.batches_per_epoch,
            self.hyperparameters.batch_size,
            seed=self.seed,
            epoch=epoch,
            rank=self.rank,
        ):
            group.append(torch.from_numpy(rows))
            if len(group) == accumulate:
                yield group
                group = []
        if group:
            yield group


def make_optimizer(
    parameters: Iterator[nn.Parameter], hyperparameters: DNNHyperparameters
) -> torch.optim.Optimizer:
    if hyperparameters.optimizer is OptimizerName.ADAM:
        return torch.optim.Adam(
            parameters,
            lr=hyperparameters.learning_rate,
            betas=(hyperparameters.momentum, 0.999),
            weight_decay=hyperparameters.weight_decay,
        )
    return torch.optim.SGD(
        parameters,
        lr=hyperparameters.learning_rate,
        momentum=hyperparameters.momentum,
        weight_decay=hyperparameters.weight_decay,
    )


def restore_optimizer(optimizer: torch.optim.Optimizer, saved: dict[str, Any]) -> None:
    """A checkpoint's optimiser state under this job's own settings: a job that goes on from
    another job's checkpoint (PBT's exploit step) with another momentum or weight decay
    trains with its own. The state of another kind of optimiser (its settings have other
    names) is left out: the weights go on, the optimiser's moments start afresh."""
    own = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
    theirs = [set(group) - {"params"} for group in saved.get("param_groups", [])]
    if theirs != [set(group) for group in own]:
        return
    optimizer.load_state_dict(saved)
    for group, settings in zip(optimizer.param_groups, own, strict=True):
        group.update(settings)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def micro_batch_loss(
    model: nn.Module, shard: Examples, rows: torch.Tensor, micro_batches: int
) -> torch.Tensor:
    """Mean loss of the micro-batch, divided so that summed micro-batch gradients average.
    An empty one (an elastic epoch's last rows, fewer than its micro-batches) adds nothing,
    but still takes part in the all-reduce."""
    if rows.numel() == 0:
        return sum((parameter.sum() * 0.0 for parameter in model.parameters()), torch.zeros(()))
    loss = functional.cross_entropy(model(shard.features[rows]), shard.labels[rows])
    return loss if micro_batches == 1 else loss / micro_batches


def backward(loss: torch.Tensor) -> None:
    loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward untyped


def accumulate_gradients(
    model: nn.Module, shard: Examples, micro_batches: list[torch.Tensor]
) -> tuple[float, int]:
    """One update's gradient in `model`'s .grad, its micro-batches' summed (a worker's own,
    no collective): returns the loss summed over its examples, and how many there were."""
    model.zero_grad(set_to_none=True)
    loss_sum, examples = 0.0, 0
    for rows in micro_batches:
        loss = micro_batch_loss(model, shard, rows, len(micro_batches))
        backward(loss)
        loss_sum += float(loss.detach()) * len(micro_batches) * len(rows)
        examples += len(rows)
    return loss_sum, examples


@torch.no_grad()
def evaluate(model: nn.Module, examples: Examples, prefix: str) -> dict[str, float]:
    """Loss and accuracy over every example, in chunks (the model is left in train mode)."""
    model.eval()
    loss_sum = correct = 0.0
    for start in range(0, len(examples), EVAL_CHUNK):
        features = examples.features[start : start + EVAL_CHUNK]
        labels = examples.labels[start : start + EVAL_CHUNK]
        logits = model(features)
        loss_sum += float(functional.cross_entropy(logits, labels, reduction="sum"))
        correct += float((logits.argmax(dim=1) == labels).sum())
    model.train()
    return {
        f"{prefix}:loss": loss_sum / len(examples),
        f"{prefix}:accuracy": correct / len(examples),
    }


@dataclass
class LossTally:
    """Training loss summed over the examples of an epoch."""

    total: float = 0.0
    examples: int = 0

    def add(self, loss_sum: float, examples: int) -> None:
        self.total += loss_sum
        self.examples += examples

    @property
    def mean(self) -> float:
        return self.total / self.examples if self.examples else float("nan")
