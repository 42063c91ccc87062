"""The DNN's pure parts: learning-rate schedule, batches, gradient noise scale, models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scaletune.algorithms.dnn import (
    DNNHyperparameters,
    GradientNoiseScale,
    LearningRateSchedule,
    ModelConfig,
    build_model,
)
from scaletune.algorithms.dnn._batches import batches_per_epoch, epoch_batches
from scaletune.data import shard_bounds


def test_linear_scaling_with_warmup_ramps_from_base_to_n_times_base() -> None:
    hyperparameters = DNNHyperparameters(learning_rate=0.1, lr_scaling="linear", warmup_epochs=2)
    schedule = LearningRateSchedule.for_job(hyperparameters, workers=4, updates_per_epoch=10)
    assert schedule.warmup_updates == 20
    assert schedule.at(0) == pytest.approx(0.1)
    assert schedule.at(10) == pytest.approx(0.25)
    assert schedule.at(20) == pytest.approx(0.4)
    assert schedule.at(1000) == pytest.approx(0.4)


@pytest.mark.parametrize(("scaling", "peak"), [("none", 0.1), ("sqrt", 0.2), ("linear", 0.4)])
def test_scaling_rules(scaling: str, peak: float) -> None:
    hyperparameters = DNNHyperparameters(learning_rate=0.1, lr_scaling=scaling)
    schedule = LearningRateSchedule.for_job(hyperparameters, workers=4, updates_per_epoch=10)
    assert schedule.at(0) == pytest.approx(peak)  # no warm-up: the scaled rate from the start


def test_every_rank_walks_the_same_number_of_batches_and_misses_no_row() -> None:
    rows, world, batch = 103, 3, 10
    count = batches_per_epoch(rows, world, batch)
    for rank in range(world):
        start, stop = shard_bounds(rows, world, rank)
        batches = list(epoch_batches(stop - start, count, batch, seed=1, epoch=1, rank=rank))
        assert len(batches) == count
        assert sorted(np.concatenate(batches)) == list(range(stop - start))


def test_each_epoch_reshuffles_the_shard_reproducibly() -> None:
    first = np.concatenate(list(epoch_batches(50, 5, 10, seed=3, epoch=1, rank=0)))
    again = np.concatenate(list(epoch_batches(50, 5, 10, seed=3, epoch=1, rank=0)))
    second = np.concatenate(list(epoch_batches(50, 5, 10, seed=3, epoch=2, rank=0)))
    assert list(first) == list(again)
    assert list(first) != list(second)


def test_gradient_noise_scale_recovers_a_known_noise_to_signal_ratio() -> None:
    """Synthetic per-example gradients with mean G and covariance Sigma: the estimate from
    norms at batch b and N b approaches tr(Sigma) / |G|^2."""
    rng = np.random.default_rng(0)
    dim, b, workers = 50, 8, 4
    mean = np.full(dim, 0.1)  # |G|^2 = 0.5
    sigma = 0.2  # tr(Sigma) = dim * sigma^2 = 2.0, so B_simple = 4
    estimate = GradientNoiseScale(b, b * workers, decay=0.999)
    for _ in range(5000):
        per_worker = mean + rng.normal(0, sigma, (workers, b, dim)).mean(axis=1)
        small = float((per_worker[0] ** 2).sum())
        big = float((per_worker.mean(axis=0) ** 2).sum())
        estimate.update(small, big)
    assert estimate.b_simple == pytest.approx(4.0, rel=0.15)


def test_gradient_noise_scale_needs_two_batch_sizes() -> None:
    with pytest.raises(ValueError, match="more than one worker"):
        GradientNoiseScale(32, 32)


@pytest.mark.parametrize("architecture", ["mlp", "cnn"])
def test_the_same_seed_builds_the_same_weights(architecture: str) -> None:
    hyperparameters = DNNHyperparameters(model=architecture, num_classes=10, hidden_units=16)
    config = ModelConfig.for_job(hyperparameters, n_features=64)
    first, second = build_model(config, seed=5), build_model(config, seed=5)
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)
    assert build_model(config, seed=5)(torch.zeros(3, 64)).shape == (3, 10)


def test_a_checkpoints_optimiser_state_goes_on_under_the_jobs_own_settings() -> None:
    from scaletune.algorithms.dnn._common import restore_optimizer

    weights = torch.nn.Parameter(torch.ones(3))
    donor = torch.optim.SGD([weights], lr=0.1, momentum=0.9, weight_decay=0.01)
    weights.grad = torch.full((3,), 2.0)
    donor.step()
    saved = donor.state_dict()
    buffer = donor.state[weights]["momentum_buffer"].clone()

    mine = torch.optim.SGD([weights], lr=0.5, momentum=0.5, weight_decay=0.0)
    restore_optimizer(mine, saved)
    assert torch.equal(mine.state[weights]["momentum_buffer"], buffer)  # the moments go on
    group = mine.param_groups[0]
    assert (group["lr"], group["momentum"], group["weight_decay"]) == (0.5, 0.5, 0.0)

    other_kind = torch.optim.Adam([weights], lr=0.01)
    restore_optimizer(other_kind, saved)  # SGD's state is not Adam's: left out
    assert not other_kind.state
