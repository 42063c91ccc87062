"""The learning rate of every update: scaled with the cluster size, warmed up gradually."""

from __future__ import annotations

from dataclasses import dataclass

from ._hyperparameters import DNNHyperparameters


@dataclass(frozen=True)
class LearningRateSchedule:
    """lr(update) ramps linearly from `base` to `peak` over `warmup_updates`, then stays.

    Goyal et al. (2017): a large global batch needs a larger learning rate (`peak`), but
    starting there diverges while the weights are random; the ramp avoids that."""

    base: float
    peak: float
    warmup_updates: int

    @classmethod
    def for_job(
        cls, hyperparameters: DNNHyperparameters, workers: int, updates_per_epoch: int
    ) -> LearningRateSchedule:
        peak = hyperparameters.learning_rate * hyperparameters.lr_scaling.factor(workers)
        warmup = round(hyperparameters.warmup_epochs * updates_per_epoch)
        return cls(hyperparameters.learning_rate, peak, warmup)

    def at(self, update: int) -> float:
        if update >= self.warmup_updates:
            return self.peak
        return self.base + (self.peak - self.base) * update / self.warmup_updates
