"""The image classifier's hyperparameters, including the large-batch remedies."""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Architecture(StrEnum):
    MLP = "mlp"  # one hidden layer of `hidden_units`, ReLU
    CNN = "cnn"  # two 3x3 convolutions (16, 32 channels) with max-pooling, then a linear layer


class OptimizerName(StrEnum):
    SGD = "sgd"  # with `momentum` (heavy ball) and `weight_decay`
    ADAM = "adam"  # `momentum` is beta1; `weight_decay` is L2 added to the gradient


class LearningRateScaling(StrEnum):
    """How the learning rate grows with the number of workers N (the global batch grows N-fold).

    `linear` is Goyal et al.'s rule for SGD (lr x N, with warm-up); `sqrt` keeps the gradient
    noise per unit of progress constant (lr x sqrt N), the usual choice for Adam."""

    NONE = "none"
    LINEAR = "linear"
    SQRT = "sqrt"

    def factor(self, workers: int) -> float:
        if self is LearningRateScaling.LINEAR:
            return float(workers)
        if self is LearningRateScaling.SQRT:
            return math.sqrt(workers)
        return 1.0


class DNNHyperparameters(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: Architecture = Architecture.MLP
    hidden_units: int = Field(default=128, ge=1, le=65_536)
    epochs: int = Field(default=10, ge=1, le=10_000)
    batch_size: int = Field(default=64, ge=1, le=1_000_000, description="per worker")
    learning_rate: float = Field(default=0.01, gt=0, le=100)
    optimizer: OptimizerName = OptimizerName.SGD
    momentum: float = Field(default=0.9, ge=0, lt=1)
    weight_decay: float = Field(default=0.0, ge=0, le=1)
    seed: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="initial weights and shuffling; the job's"
    )
    lr_scaling: LearningRateScaling = LearningRateScaling.NONE
    warmup_epochs: float = Field(
        default=0.0, ge=0, le=10_000, description="ramp the lr linearly from lr to the scaled lr"
    )
    gradient_accumulation_steps: int = Field(
        default=1, ge=1, le=10_000, description="micro-batches summed into one update"
    )
    gns_every_updates: int = Field(
        default=16,
        ge=0,
        le=1_000_000,
        description="sample the gradient noise scale on every this many updates (0: never); "
        "a sampling update's all-reduce does not overlap the backward pass",
    )
    num_classes: int | None = Field(
        default=None, ge=2, le=100_000, description="from the data's labels when not given"
    )
