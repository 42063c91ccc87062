"""How far a DNN job has come, what learning rate its next update takes, and when an epoch
of it closes (a report) and when the job is done.

With a fixed scaling rule (`FixedPace`) an epoch is one pass over the data and progress is
the update count. With AdaScale (`AdaScalePace`) progress counts one worker's updates: each
update adds the gain it was taken with (the sum of r_t, the paper's scale-invariant
iterations), an epoch closes when one worker would have finished one, and the job ends once
it has made the progress of `epochs` one-worker epochs. It may pass over the data more often
than that: where the signal dominates the noise a bigger batch buys little, r stays near 1 and
each update counts for about one worker's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from scaletune.gradient_noise import GradientNoiseScale

from ._batches import batches_per_epoch
from ._checkpoint import Position
from ._hyperparameters import DNNHyperparameters, LearningRateScaling
from ._schedule import LearningRateSchedule


class Pace(Protocol):
    @property
    def schedule(self) -> LearningRateSchedule: ...

    @property
    def epochs(self) -> int: ...

    def at(self, epoch: int, index: int, update: int, progress: float) -> Position:
        """The position after an update (epoch and index: where in the data)."""
        ...

    def reached(self, position: Position) -> int:
        """The last epoch closed at this position (0 before the first)."""
        ...

    def finished(self, position: Position) -> bool:
        """Whether the job's training is done at this position."""
        ...

    def scale(self, progress: float, noise: GradientNoiseScale | None) -> float:
        """The scaling factor of the next update (warm-up ramped in)."""
        ...

    def advance(self, progress: float, scale: float, applied: float = 1.0) -> float:
        """Progress after an update taken at this scale; `applied`: the share of a whole
        update's gradients it averaged (a round without its backup workers' is less)."""
        ...

    def metrics(
        self, position: Position, noise: GradientNoiseScale | None, updates_per_epoch: int
    ) -> dict[str, float]:
        """What an epoch's report adds."""
        ...


@dataclass(frozen=True)
class FixedPace:
    schedule: LearningRateSchedule
    epochs: int

    def at(self, epoch: int, index: int, update: int, progress: float) -> Position:
        return Position(epoch, index, update)

    def reached(self, position: Position) -> int:
        return max(0, position.epoch - 1)

    def finished(self, position: Position) -> bool:
        return self.reached(position) >= self.epochs

    def scale(self, progress: float, noise: GradientNoiseScale | None) -> float:
        return self.schedule.scale(progress, self.schedule.fixed_scale)

    def advance(self, progress: float, scale: float, applied: float = 1.0) -> float:
        return progress + applied

    def metrics(
        self, position: Position, noise: GradientNoiseScale | None, updates_per_epoch: int
    ) -> dict[str, float]:
        return {}


@dataclass(frozen=True)
class AppliedPace(FixedPace):
    """A fixed scaling rule whose epochs the parameter server counts: a round that goes on
    without its late workers (backup workers) applies less than a whole round's gradients,
    so an epoch closes when the gradients applied add up to a pass over the data, not when
    a worker has passed over its shard (a straggler's shard would hold the job's end)."""

    updates_per_epoch: int = 1

    def at(self, epoch: int, index: int, update: int, progress: float) -> Position:
        return Position(epoch, index, update, progress)

    def reached(self, position: Position) -> int:
        return _epochs_of_progress(position, self.updates_per_epoch, self.epochs)


@dataclass(frozen=True)
class AdaScalePace:
    schedule: LearningRateSchedule
    epochs: int
    reference_updates_per_epoch: int  # one worker's, at the micro-batch size

    def at(self, epoch: int, index: int, update: int, progress: float) -> Position:
        return Position(epoch, index, update, progress)

    def reached(self, position: Position) -> int:
        return _epochs_of_progress(position, self.reference_updates_per_epoch, self.epochs)

    def finished(self, position: Position) -> bool:
        return self.reached(position) >= self.epochs

    def scale(self, progress: float, noise: GradientNoiseScale | None) -> float:
        return self.schedule.scale(progress, 1.0 if noise is None else noise.gain)

    def advance(self, progress: float, scale: float, applied: float = 1.0) -> float:
        return progress + scale * applied

    def metrics(
        self, position: Position, noise: GradientNoiseScale | None, updates_per_epoch: int
    ) -> dict[str, float]:
        return {
            "adascale:gain": 1.0 if noise is None else noise.gain,
            "train:updates": float(position.update),
            "train:data_epochs": position.update / updates_per_epoch,
        }


def _epochs_of_progress(position: Position, updates_per_epoch: int, epochs: int) -> int:
    """Whole epochs in a position's progress, at most `epochs`. A hair of slack: progress
    summed in floating point lands on a boundary from below."""
    done = position.progress_or_update / updates_per_epoch
    return min(math.floor(done + 1e-9), epochs)


def is_adaptive(hyperparameters: DNNHyperparameters) -> bool:
    """Whether the learning rate follows AdaScale's measured gain."""
    return hyperparameters.lr_scaling is LearningRateScaling.ADASCALE


def noise_estimate(hyperparameters: DNNHyperparameters, workers: int) -> GradientNoiseScale | None:
    """Estimates of the gradient's signal and noise, where an update averages two batch sizes'
    worth to compare: S = workers x micro-batches > 1 gradients of one micro-batch each."""
    micro_batches = workers * hyperparameters.gradient_accumulation_steps
    if micro_batches < 2:
        return None
    batch = hyperparameters.batch_size
    return GradientNoiseScale(batch, batch * micro_batches)


def estimate_every(hyperparameters: DNNHyperparameters) -> int:
    """The updates between two estimates of the noise: AdaScale's setting where the gain
    steers the rate, else the noise scale's sampling (0: never)."""
    if is_adaptive(hyperparameters):
        return hyperparameters.adascale_every_updates
    return hyperparameters.gns_every_updates


def measures_noise(hyperparameters: DNNHyperparameters, update: int) -> bool:
    """Whether update `update`'s (0 the first) squared norms are taken: AdaScale's every
    update (pooled between its estimates), the noise scale's only where it estimates."""
    if is_adaptive(hyperparameters):
        return True
    return estimates_noise(hyperparameters, update)


def estimates_noise(hyperparameters: DNNHyperparameters, update: int) -> bool:
    """Whether the estimates are updated at update `update`, from the updates measured since
    the last. AdaScale's first is, so that the gain is known from then on; the noise scale
    alone is sampled at the end of a span."""
    every = estimate_every(hyperparameters)
    if is_adaptive(hyperparameters):
        return update % every == 0
    return every > 0 and (update + 1) % every == 0


def pace_for(
    hyperparameters: DNNHyperparameters, workers: int, train_rows: int, updates_per_epoch: int
) -> Pace:
    """`updates_per_epoch`: this job's own (its workers, batch and accumulation)."""
    if is_adaptive(hyperparameters):
        reference = batches_per_epoch(train_rows, 1, hyperparameters.batch_size)
        schedule = LearningRateSchedule.for_job(hyperparameters, 1, reference)
        return AdaScalePace(schedule, hyperparameters.epochs, reference)
    schedule = LearningRateSchedule.for_job(hyperparameters, workers, updates_per_epoch)
    return FixedPace(schedule, hyperparameters.epochs)
