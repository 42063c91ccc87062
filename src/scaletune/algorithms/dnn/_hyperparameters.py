"""The image classifier's hyperparameters, including the large-batch remedies."""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scaletune.gradient_noise import ADASCALE_ESTIMATE_EVERY


class Architecture(StrEnum):
    MLP = "mlp"  # one hidden layer of `hidden_units`, ReLU
    CNN = "cnn"  # two 3x3 convolutions (16, 32 channels) with max-pooling, then a linear layer


class OptimizerName(StrEnum):
    SGD = "sgd"  # with `momentum` (heavy ball) and `weight_decay`
    ADAM = "adam"  # `momentum` is beta1; `weight_decay` is L2 added to the gradient


class LearningRateScaling(StrEnum):
    """How the learning rate grows with the number of workers N (the global batch grows N-fold).

    `linear` is Goyal et al.'s rule for SGD (lr x N, with warm-up); `sqrt` keeps the gradient
    noise per unit of progress constant (lr x sqrt N), the usual choice for Adam. `adascale`
    (Johnson et al. 2020, SGD) estimates the gain from the gradient noise (every
    `adascale_every_updates`-th update, from each update measured since) and counts epochs as
    one worker's (`_pace`)."""

    NONE = "none"
    LINEAR = "linear"
    SQRT = "sqrt"
    ADASCALE = "adascale"

    def factor(self, workers: int) -> float:
        """The fixed factor; AdaScale's gain is measured, not fixed (1 here)."""
        if self is LearningRateScaling.LINEAR:
            return float(workers)
        if self is LearningRateScaling.SQRT:
            return math.sqrt(workers)
        return 1.0


class LearningRateDecay(StrEnum):
    """How the learning rate falls over the job's progress (in one worker's epochs with
    AdaScale, so that the schedule composes with its gain as in the paper)."""

    CONSTANT = "constant"
    STEP = "step"  # x lr_decay every lr_step_epochs
    COSINE = "cosine"  # half a cosine down to lr_final x the rate at the last epoch


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
    lr_schedule: LearningRateDecay = LearningRateDecay.CONSTANT
    lr_step_epochs: float = Field(
        default=1.0, gt=0, le=10_000, description="lr_schedule='step': epochs between decays"
    )
    lr_decay: float = Field(
        default=0.1, gt=0, le=1, description="lr_schedule='step': the factor of each decay"
    )
    lr_final: float = Field(
        default=0.0, ge=0, le=1, description="lr_schedule='cosine': the last rate, x the peak"
    )
    gradient_accumulation_steps: int = Field(
        default=1, ge=1, le=10_000, description="micro-batches summed into one update"
    )
    gns_every_updates: int = Field(
        default=16,
        ge=0,
        le=1_000_000,
        description="sample the gradient noise scale on every this many updates (0: never); "
        "with lr_scaling='adascale', adascale_every_updates sets it",
    )
    adascale_every_updates: int = Field(
        default=ADASCALE_ESTIMATE_EVERY,
        ge=1,
        le=10_000,
        description="lr_scaling='adascale': estimate the gain on every this many updates, "
        "from every update measured since, and step at the last one between (1: every update)",
    )
    num_classes: int | None = Field(
        default=None, ge=2, le=100_000, description="from the data's labels when not given"
    )

    @model_validator(mode="after")
    def _adascale_needs_sgd(self) -> DNNHyperparameters:
        if (
            self.lr_scaling is LearningRateScaling.ADASCALE
            and self.optimizer is not OptimizerName.SGD
        ):
            raise ValueError(
                f"lr_scaling='adascale' scales SGD's step; optimizer={self.optimizer.value!r} "
                "normalises its own (use lr_scaling='sqrt' with Adam)"
            )
        return self
