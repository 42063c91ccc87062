"""Staleness remedies on a real parameter server in one process, pushes pinned in order:
the step of a stale gradient scaled, delay-compensated, and the momentum asynchrony adds
taken off the optimiser's."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from scaletune.algorithms.dnn import LearningRateSchedule
from scaletune.algorithms.dnn._pace import FixedPace
from scaletune.algorithms.dnn._parameter_server import ParameterServer
from scaletune.algorithms.dnn._ps_client import ParameterServerClient
from scaletune.algorithms.dnn._ps_modes import Asynchronous
from scaletune.algorithms.dnn._ps_updates import ServerUpdates
from scaletune.algorithms.dnn._staleness import (
    AsyncRemedies,
    Compensator,
    DelayCompensation,
    ImplicitMomentumCorrection,
    NoCompensation,
    StalenessScaledRate,
    StepRestoration,
)
from scaletune.spec import DistributionSpec
from tests.algorithms.dnn.servers import connect, finish, start_server, tiny_model

UNIT_RATE = FixedPace(LearningRateSchedule(1.0, 1.0, 0), epochs=1)


def _plain_updates(model: nn.Module, compensation: Compensator) -> ServerUpdates:
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    return ServerUpdates(model, optimizer, UNIT_RATE, remedies=AsyncRemedies(compensation))


def _async_server(updates: ServerUpdates, model: nn.Module) -> ParameterServer:
    return start_server(model, updates, 2, Asynchronous())


def _push(client: ParameterServerClient, model: nn.Module, value: torch.Tensor) -> None:
    for parameter in model.parameters():
        parameter.grad = value.reshape(parameter.shape).clone()
    client.push(model, 0.0, 1, stop_wanted=False)


def test_a_stale_push_takes_a_step_divided_by_its_staleness(
    clients: list[ParameterServerClient],
) -> None:
    model = tiny_model()
    server = _async_server(_plain_updates(model, StalenessScaledRate()), model)
    try:
        (a, model_a), (b, model_b) = (connect(server, rank, clients) for rank in (0, 1))
        start = server.snapshot().clone()
        one = torch.ones(2)
        _push(a, model_a, one)  # fresh: a whole step
        _push(a, model_a, one)  # fresh again (a pulled version 1)
        _push(b, model_b, one)  # computed on version 0, two updates ago: half a step
        torch.testing.assert_close(server.snapshot(), start - 2.5)
        assert server.take_statistics().staleness == [0, 0, 2]
        finish(server, a, b)
    finally:
        server.close()


def test_a_stale_push_is_delay_compensated_against_the_weights_it_was_computed_on(
    clients: list[ParameterServerClient],
) -> None:
    model = tiny_model()
    strength = 0.5
    server = _async_server(_plain_updates(model, DelayCompensation(strength)), model)
    try:
        (a, model_a), (b, model_b) = (connect(server, rank, clients) for rank in (0, 1))
        start = server.snapshot().clone()
        g_a, g_b = torch.tensor([1.0, -2.0]), torch.tensor([3.0, 0.5])
        _push(a, model_a, g_a)  # fresh: applied as it is
        after_a = start - g_a
        torch.testing.assert_close(server.snapshot(), after_a)
        _push(b, model_b, g_b)  # one update stale: computed on `start`
        mean_square = 0.95 * g_a**2 + 0.05 * g_b**2
        compensated = g_b + strength / (mean_square.sqrt() + 1e-7) * g_b**2 * (after_a - start)
        torch.testing.assert_close(server.snapshot(), after_a - compensated)
        finish(server, a, b)
    finally:
        server.close()


def test_the_momentum_asynchrony_adds_is_taken_off_the_optimisers() -> None:
    correction = ImplicitMomentumCorrection(momentum=0.9, mean_staleness=3.0)
    assert correction.explicit(3) == pytest.approx(0.9 - 0.75)  # 1 - 1/N at N = 4
    calm = ImplicitMomentumCorrection(momentum=0.9, mean_staleness=0.0)
    assert calm.explicit(0) == pytest.approx(0.9)  # no staleness, nothing added
    heavy = ImplicitMomentumCorrection(momentum=0.5, mean_staleness=7.0)
    assert heavy.explicit(7) == 0.0  # never below zero


def test_the_server_steps_with_the_corrected_momentum(
    clients: list[ParameterServerClient],
) -> None:
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.9)
    correction = ImplicitMomentumCorrection(momentum=0.9, mean_staleness=1.0)
    remedies = AsyncRemedies(NoCompensation(), correction)
    updates = ServerUpdates(model, optimizer, UNIT_RATE, remedies=remedies)
    server = _async_server(updates, model)
    try:
        (a, model_a), (b, model_b) = (connect(server, rank, clients) for rank in (0, 1))
        start = server.snapshot().clone()
        one = torch.ones(2)
        _push(a, model_a, one)
        first = 0.9 - (0.99 * 1.0) / (1 + 0.99 * 1.0)  # one fresh push moves the mean
        assert optimizer.param_groups[0]["momentum"] == pytest.approx(first)
        _push(b, model_b, one)  # one update stale
        mean = 0.99 * 0.99 + 0.01
        second = 0.9 - mean / (1 + mean)
        assert optimizer.param_groups[0]["momentum"] == pytest.approx(second)
        # SGD's heavy ball: buffer = g, then second * buffer + g.
        expected = start - 1.0 - (second + 1.0)
        torch.testing.assert_close(server.snapshot(), expected)
        finish(server, a, b)
    finally:
        server.close()


def test_the_step_is_given_back_while_the_loss_falls_and_taken_back_when_it_rises() -> None:
    # 2 workers at momentum 0.9: staleness 1 takes 0.5 off, leaving 0.4; an epoch's pushes then
    # move the weights 2 x 0.1 / 0.6 = 1/3 as far as the synchronous rounds: up to 3x back.
    restoration = StepRestoration(momentum=0.9, window=2)

    def window(loss: float) -> float:
        restoration.step_factor(0.4, 1.0, loss, 10)
        return restoration.step_factor(0.4, 1.0, loss, 10)

    assert window(5.0) == 1.0  # the first window: nothing to compare with
    factors = [window(loss) for loss in (4.0, 3.0, 2.0, 1.5, 1.2, 1.0, 0.9)]
    assert factors[:4] == pytest.approx([1.25, 1.5625, 1.953125, 2.44140625])
    assert factors[-1] == pytest.approx(3.0)  # never past what the correction took
    assert window(1.7) == pytest.approx(1.5)  # the loss rose (under twice): halved
    assert window(3.0) == 1.0  # and again, to no less than the step asked for
    assert restoration.step_factor(0.4, 1.0, 1.0, 10) == 1.0  # mid-window: unchanged


def test_a_mean_square_whose_gradient_stays_zero_never_turns_denormal() -> None:
    # Every pass over denormal floats is many times slower; a weight whose gradient stops (a
    # pixel no later image lights) decayed into them after about 1,500 pushes.
    compensation = DelayCompensation(2.0)
    weights = torch.zeros(2)
    compensation.compensate(torch.tensor([1e-3, 1e-3]), 1, weights, weights)
    for _ in range(3000):
        compensation.compensate(torch.tensor([0.0, 1e-3]), 1, weights, weights)
    state = compensation.state()
    assert state is not None
    smallest = float(state["mean_square"].min())
    assert smallest >= torch.finfo(torch.float32).tiny  # a normal float
    assert smallest < 1e-20  # and still about nothing


def _restored(restoration: StepRestoration) -> float:
    """Windows of falling loss (window=1) until the step is given back past 1."""
    for loss in (5.0, 4.0, 3.0, 2.0):
        factor = restoration.step_factor(0.4, 1.0, loss, 1)
    assert factor > 1
    return factor


def test_a_push_whose_loss_doubles_takes_the_restored_step_back_at_once() -> None:
    # A diverging step ran its loss from 0.9 to 315 within one window of 10 pushes; the
    # window's mean came too late (benchmarks/results/convergence_async_grid.md).
    restoration = StepRestoration(momentum=0.9, window=3)
    restoration.step_factor(0.4, 1.0, 30.0, 10)
    restoration.step_factor(0.4, 1.0, 30.0, 10)
    restoration.step_factor(0.4, 1.0, 30.0, 10)  # the first window: a mean of 3.0 a row
    for _ in range(3):  # falling: a quarter more
        restoration.step_factor(0.4, 1.0, 20.0, 10)
    assert restoration.factor == pytest.approx(1.25)
    assert restoration.step_factor(0.4, 1.0, 39.0, 10) == pytest.approx(1.25)  # under 2x 2.0
    assert restoration.step_factor(0.4, 1.0, 41.0, 10) == 1.0  # mid-window, over 2x: at once
    assert restoration.step_factor(0.4, 1.0, 10.0, 10) == 1.0  # a new window has begun


def test_a_loss_that_is_not_a_number_never_gives_the_step_back() -> None:
    # NaN compares false with everything: `mean > previous` grew the step of a diverged run.
    spiked = StepRestoration(momentum=0.9, window=1)
    _restored(spiked)
    assert spiked.step_factor(0.4, 1.0, float("nan"), 1) == 1.0
    windowed = StepRestoration(momentum=0.9, window=1)
    windowed.step_factor(0.4, 1.0, 1.0, 1)
    for _ in range(3):
        assert windowed.step_factor(0.4, 1.0, float("nan"), 1) == 1.0


@pytest.mark.parametrize(
    ("settings", "compensation", "corrected", "restored"),
    [
        ({}, DelayCompensation, True, True),  # the defaults
        ({"implicit_momentum": "subtract"}, DelayCompensation, True, False),
        ({"staleness_compensation": "none"}, NoCompensation, True, True),
        (
            {"staleness_compensation": "lr", "implicit_momentum": "ignore"},
            StalenessScaledRate,
            False,
            False,
        ),
    ],
    ids=str,
)
def test_the_asynchronous_remedies_follow_the_distribution(
    settings: dict[str, str], compensation: type, corrected: bool, restored: bool
) -> None:
    spec = DistributionSpec.model_validate(
        {"strategy": "parameter_server", "mode": "async", **settings}
    )
    remedies = AsyncRemedies.of(spec, momentum=0.9, workers=4)
    assert isinstance(remedies.compensation, compensation)
    assert (remedies.momentum is not None) is corrected
    assert (remedies.restoration is not None) is restored
    if remedies.momentum is not None:
        assert remedies.momentum.mean_staleness == 3  # N - 1 until pushes are measured
    assert isinstance(AsyncRemedies.none().compensation, NoCompensation)


def test_a_restored_step_resumes_where_it_was() -> None:
    restoration = StepRestoration(momentum=0.9, window=1)
    for loss in (3.0, 2.0, 1.0):
        restoration.step_factor(0.4, 1.0, loss, 1)
    again = StepRestoration(momentum=0.9, window=1)
    again.restore(restoration.state())
    assert again.step_factor(0.4, 1.0, 0.5, 1) == restoration.step_factor(0.4, 1.0, 0.5, 1)
