"""One worker's view of a DNN job: its data, its plan, and how an epoch is reported."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from scaletune.worker import WorkerContext

from ._common import Examples, Plan, evaluate
from ._hyperparameters import DNNHyperparameters
from ._model import ModelConfig, build_model


@dataclass(frozen=True)
class DNNRun:
    ctx: WorkerContext
    hyperparameters: DNNHyperparameters
    plan: Plan
    config: ModelConfig
    seed: int
    device: torch.device
    train: Examples  # this worker's shard
    validation: Examples | None  # the whole channel, on rank 0 only

    def new_model(self) -> nn.Module:
        """Every rank builds the same initial weights from the seed."""
        return build_model(self.config, self.seed).to(self.device)

    def end_epoch(self, epoch: int, model: nn.Module, metrics: dict[str, float]) -> None:
        """Rank 0 scores the whole validation set once and reports (step = epoch)."""
        if not self.ctx.is_chief:
            return
        if self.validation is not None:
            metrics = metrics | evaluate(model, self.validation, "validation")
        self.ctx.report(epoch, **metrics)
