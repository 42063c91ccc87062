"""AdaScale's pure parts: the gain from known noise and signal, progress in one worker's
updates, schedules over progress, and the micro-batch norms measured beside training."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as functional

from scaletune.algorithms.dnn import DNNHyperparameters, GradientNoiseScale, LearningRateSchedule
from scaletune.algorithms.dnn._checkpoint import Position
from scaletune.algorithms.dnn._pace import (
    AdaScalePace,
    FixedPace,
    estimates_noise,
    measures_noise,
    pace_for,
)
from scaletune.algorithms.dnn._schedule import ConstantDecay, CosineDecay, StepDecay
from scaletune.gradient_noise import ADASCALE_ESTIMATE_EVERY, NormPool
from scaletune.torch import MicroBatchNorms


def _estimate(b: int, scale: int, true_sq: float, variance: float) -> GradientNoiseScale:
    """Estimates from the expected squared norms of known |G|^2 and per-micro-batch variance
    sigma^2: E|g_micro|^2 = |G|^2 + sigma^2, E|g_mean|^2 = |G|^2 + sigma^2 / S."""
    noise = GradientNoiseScale(b, b * scale)
    noise.update(true_sq + variance, true_sq + variance / scale)
    return noise


def test_the_gain_of_a_worked_example() -> None:
    # |G|^2 = 0.5, sigma^2 = 0.25 (tr(Sigma) = 2 at b = 8), S = 4:
    # r = (0.25 + 0.5) / (0.25 / 4 + 0.5) = 0.75 / 0.5625 = 4 / 3.
    noise = _estimate(8, 4, true_sq=0.5, variance=0.25)
    assert noise.b_simple == pytest.approx(4.0)  # tr(Sigma) / |G|^2 = 2 / 0.5
    assert noise.gain == pytest.approx(4 / 3)


def test_pooled_updates_weigh_as_many_measurements_as_they_hold() -> None:
    # Four updates of the same norms, pooled, move the averages as four single ones do.
    single, pooled = GradientNoiseScale(8, 32), GradientNoiseScale(8, 32)
    for noise in (single, pooled):
        noise.update(1.0, 0.4)
    for _ in range(4):
        single.update(0.9, 0.3)
    pooled.add(NormPool(local=4 * 4 * 0.9, averaged=4 * 0.3, updates=4))  # S = 4 each
    assert pooled.estimates == pytest.approx(single.estimates)
    before = pooled.estimates
    pooled.add(NormPool())  # nothing measured since: nothing moves
    assert pooled.estimates == before


@pytest.mark.parametrize("scale", [2, 4, 16])
def test_the_gain_tends_to_s_where_noise_dominates_and_to_1_where_signal_does(scale: int) -> None:
    assert _estimate(8, scale, true_sq=1e-9, variance=1.0).gain == pytest.approx(scale, rel=1e-6)
    assert _estimate(8, scale, true_sq=0.0, variance=1.0).gain == scale
    assert _estimate(8, scale, true_sq=1.0, variance=1e-9).gain == pytest.approx(1.0, abs=1e-6)
    assert GradientNoiseScale(8, 8 * scale).gain == 1.0  # nothing measured yet


def test_one_worker_with_one_micro_batch_has_a_gain_of_1_and_counts_its_own_updates() -> None:
    hyperparameters = DNNHyperparameters(lr_scaling="adascale", batch_size=10, epochs=2)
    pace = pace_for(hyperparameters, workers=1, train_rows=100, updates_per_epoch=10)
    assert pace.scale(0.0, None) == 1.0
    progress = 0.0
    for _ in range(20):
        progress = pace.advance(progress, pace.scale(progress, None))
    assert pace.reached(pace.at(3, 0, 20, progress)) == 2  # as a plain one-worker job


def test_adascale_counts_progress_in_one_workers_updates_whatever_the_cluster() -> None:
    hyperparameters = DNNHyperparameters(lr_scaling="adascale", batch_size=10, epochs=3)
    pace = pace_for(hyperparameters, workers=4, train_rows=1000, updates_per_epoch=25)
    assert isinstance(pace, AdaScalePace)
    assert pace.reference_updates_per_epoch == 100  # 1000 rows at 10 a batch, one worker
    noise = _estimate(10, 4, true_sq=0.5, variance=0.25)  # r = 4 / 3
    progress, closed = 0.0, list[int]()
    for update in range(1, 300):
        progress = pace.advance(progress, pace.scale(progress, noise))
        here = pace.at(1, update, update, progress)
        if pace.reached(here) > len(closed):
            closed.append(update)
        if pace.reached(here) == pace.epochs:
            break
    # Each update makes 4/3 of one worker's: an epoch of 100 closes after 75 updates.
    assert closed == [75, 150, 225]


def test_a_fixed_pace_closes_epochs_at_the_end_of_the_data() -> None:
    hyperparameters = DNNHyperparameters(lr_scaling="linear", epochs=2)
    pace = pace_for(hyperparameters, workers=4, train_rows=1000, updates_per_epoch=25)
    assert isinstance(pace, FixedPace)
    assert pace.scale(0.0, None) == 4.0
    assert pace.reached(Position(2, 0, 25)) == 1
    assert pace.reached(Position(2, 24, 49)) == 1


def test_step_and_cosine_schedules_at_their_positions() -> None:
    step = StepDecay(every=100, rate=0.1)
    assert [step.factor(p) for p in (0, 99.9, 100, 250)] == pytest.approx([1, 1, 0.1, 0.01])
    cosine = CosineDecay(total=100, final=0.1)
    assert cosine.factor(0) == pytest.approx(1.0)
    assert cosine.factor(50) == pytest.approx(0.55)
    assert cosine.factor(100) == pytest.approx(0.1)
    assert cosine.factor(150) == pytest.approx(0.1)
    assert ConstantDecay().factor(1e9) == 1.0


def test_a_schedule_stated_in_one_worker_epochs_composes_with_the_gain() -> None:
    """lr = base x (gain ramped in over warm-up) x decay(progress), progress in one worker's
    updates: at 4 workers the decay falls where it falls on one."""
    hyperparameters = DNNHyperparameters(
        learning_rate=0.1,
        lr_scaling="adascale",
        lr_schedule="step",
        lr_step_epochs=2,
        lr_decay=0.5,
        warmup_epochs=1,
        batch_size=10,
        epochs=4,
    )
    pace = pace_for(hyperparameters, workers=4, train_rows=1000, updates_per_epoch=25)
    schedule = pace.schedule
    assert schedule.warmup_updates == 100 and schedule.decay == StepDecay(200, 0.5)
    assert pace.scale(50.0, _estimate(10, 4, 0.5, 0.25)) == pytest.approx(1 + (4 / 3 - 1) / 2)
    assert schedule.rate(50.0, 2.0) == pytest.approx(0.2)
    assert schedule.rate(200.0, 2.0) == pytest.approx(0.1)  # decayed at one worker's epoch 2
    linear = DNNHyperparameters(**{**hyperparameters.model_dump(), "lr_scaling": "linear"})
    fixed = LearningRateSchedule.for_job(linear, 4, 25)
    assert fixed.at(25) == pytest.approx(0.4)  # warm-up done after 25 of its own updates
    assert fixed.at(50) == pytest.approx(0.4 * 0.5)  # the step falls at its 2nd epoch


def test_micro_batch_norms_see_each_micro_batchs_own_gradient() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    features, labels = torch.randn(8, 4), torch.randint(0, 3, (8,))
    halves = [slice(0, 4), slice(4, 8)]
    norms = MicroBatchNorms(model, micro_batches=2)
    norms.active = True
    for rows in halves:  # as the training loop does: each loss divided by the count
        (functional.cross_entropy(model(features[rows]), labels[rows]) / 2).backward()  # type: ignore[no-untyped-call]
    local, averaged = norms.take()
    norms.close()

    def gradient(rows: slice) -> torch.Tensor:
        model.zero_grad()
        functional.cross_entropy(model(features[rows]), labels[rows]).backward()  # type: ignore[no-untyped-call]
        return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])

    first, second = gradient(halves[0]), gradient(halves[1])
    expected_local = float(first.pow(2).sum() + second.pow(2).sum())
    assert local == pytest.approx(expected_local, rel=1e-5)
    assert averaged == pytest.approx(float(((first + second) / 2).pow(2).sum()), rel=1e-5)
    assert not math.isclose(local / 2, averaged)  # the micro-batches disagree: noise


def test_adascale_measures_every_update_and_estimates_every_kth_the_noise_scale_samples() -> None:
    adascale = DNNHyperparameters(lr_scaling="adascale")
    assert adascale.adascale_every_updates == ADASCALE_ESTIMATE_EVERY
    pooled = DNNHyperparameters(lr_scaling="adascale", adascale_every_updates=8)
    assert all(measures_noise(pooled, u) for u in range(40))
    assert [u for u in range(40) if estimates_noise(pooled, u)] == [0, 8, 16, 24, 32]
    noise_scale = DNNHyperparameters()  # the noise scale alone, a metric: sampled
    assert [u for u in range(40) if measures_noise(noise_scale, u)] == [15, 31]
    assert [u for u in range(40) if estimates_noise(noise_scale, u)] == [15, 31]
    assert not any(measures_noise(DNNHyperparameters(gns_every_updates=0), u) for u in range(40))
    with pytest.raises(ValueError, match="adascale_every_updates"):
        DNNHyperparameters(lr_scaling="adascale", adascale_every_updates=0)


def test_micro_batch_norms_hook_the_parameters_only_while_measuring() -> None:
    model = torch.nn.Linear(4, 3)
    norms = MicroBatchNorms(model, micro_batches=1)
    assert not any(p._backward_hooks for p in model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    assert norms.take()[0] == 0.0  # not measured
    norms.active = True
    norms.active = True  # once: not hooked twice
    assert all(len(p._backward_hooks or {}) == 1 for p in model.parameters())
    model.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    local, averaged = norms.take()
    assert local == pytest.approx(averaged, rel=1e-6) and local > 0  # one micro-batch
    norms.active = False
    assert not any(p._backward_hooks for p in model.parameters())


def test_adascale_is_for_sgd() -> None:
    with pytest.raises(ValueError, match="lr_scaling='adascale' scales SGD's step"):
        DNNHyperparameters(lr_scaling="adascale", optimizer="adam")


def test_half_precision_gradients_are_widened_before_their_squares_are_summed() -> None:
    from scaletune.torch import _squared_norm

    ones = torch.ones(70_000, dtype=torch.float16)  # their squares sum past float16's 65,504
    assert _squared_norm(ones) == 70_000.0
    assert _squared_norm(torch.full((3,), 0.5, dtype=torch.bfloat16)) == 0.75
