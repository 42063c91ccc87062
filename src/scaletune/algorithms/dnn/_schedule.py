"""The learning rate of every update: the base rate, scaled with the cluster, warmed up, and
decayed by a schedule over the job's progress.

lr = base x scale x decay(progress). `scale` is the factor the cluster calls for: fixed by
`lr_scaling` (N, sqrt N, 1) or, with AdaScale, the gain measured at this update; warm-up ramps
it in from 1 over `warmup_epochs` (Goyal et al. 2017: starting a large batch at its full rate
diverges while the weights are random). `progress` counts updates of the job's reference: its
own updates, or with AdaScale one worker's (scale-invariant iterations), so that a schedule
stated in epochs means the same on any cluster size."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from ._hyperparameters import DNNHyperparameters, LearningRateDecay


class Decay(Protocol):
    def factor(self, progress: float) -> float:
        """What the learning rate is multiplied by at this progress (1 at the start)."""
        ...


@dataclass(frozen=True)
class ConstantDecay:
    def factor(self, progress: float) -> float:
        return 1.0


@dataclass(frozen=True)
class StepDecay:
    """Multiplied by `rate` every `every` updates of progress (PyTorch's StepLR)."""

    every: float
    rate: float

    def factor(self, progress: float) -> float:
        return float(self.rate ** math.floor(progress / self.every))


@dataclass(frozen=True)
class CosineDecay:
    """Half a cosine from 1 down to `final` over `total` updates, then `final`."""

    total: float
    final: float

    def factor(self, progress: float) -> float:
        done = min(max(progress / self.total, 0.0), 1.0)
        return self.final + (1.0 - self.final) * 0.5 * (1.0 + math.cos(math.pi * done))


@dataclass(frozen=True)
class LearningRateSchedule:
    """`peak` is base x the fixed scaling factor (for AdaScale, base: its gain comes with
    each update); `warmup_updates` and the decay are in updates of progress."""

    base: float
    peak: float
    warmup_updates: int
    decay: Decay = field(default_factory=ConstantDecay)

    @classmethod
    def for_job(
        cls, hyperparameters: DNNHyperparameters, workers: int, updates_per_epoch: int
    ) -> LearningRateSchedule:
        """`updates_per_epoch`: of the job's reference (one worker's, with AdaScale)."""
        factor = hyperparameters.lr_scaling.factor(workers)
        return cls(
            hyperparameters.learning_rate,
            hyperparameters.learning_rate * factor,
            round(hyperparameters.warmup_epochs * updates_per_epoch),
            decay_of(hyperparameters, updates_per_epoch),
        )

    @property
    def fixed_scale(self) -> float:
        return self.peak / self.base

    def scale(self, progress: float, target: float) -> float:
        """The scaling factor in force: `target`, ramped in from 1 during warm-up."""
        if progress >= self.warmup_updates:
            return target
        return 1.0 + (target - 1.0) * progress / self.warmup_updates

    def rate(self, progress: float, scale: float) -> float:
        """The learning rate at this progress, under a scaling factor already ramped in."""
        return self.base * scale * self.decay.factor(progress)

    def at(self, update: int) -> float:
        """With a fixed scaling factor, progress is the update count."""
        return self.rate(update, self.scale(update, self.fixed_scale))


def decay_of(hyperparameters: DNNHyperparameters, updates_per_epoch: int) -> Decay:
    if hyperparameters.lr_schedule is LearningRateDecay.STEP:
        return StepDecay(
            hyperparameters.lr_step_epochs * updates_per_epoch, hyperparameters.lr_decay
        )
    if hyperparameters.lr_schedule is LearningRateDecay.COSINE:
        return CosineDecay(hyperparameters.epochs * updates_per_epoch, hyperparameters.lr_final)
    return ConstantDecay()
