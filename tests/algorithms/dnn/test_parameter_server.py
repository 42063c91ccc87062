"""The parameter server in one process: what sync, async and a staleness bound mean."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from scaletune.algorithms.dnn._parameter_server import (
    ParameterServer,
    ParameterServerClient,
    ParameterServerError,
)
from scaletune.algorithms.dnn._ps_updates import ServerUpdates
from tests.algorithms.dnn.servers import connect, start_server, tiny_model


def _server(world_size: int, *, synchronous: bool, bound: int | None = None) -> ParameterServer:
    model = tiny_model()
    updates = ServerUpdates.constant(model, torch.optim.SGD(model.parameters(), lr=1.0), 1.0)
    return start_server(model, updates, world_size, synchronous=synchronous, bound=bound)


def _set_gradient(model: nn.Module, value: float) -> None:
    for parameter in model.parameters():
        parameter.grad = torch.full_like(parameter, value)


def test_async_applies_each_push_and_measures_staleness(
    clients: list[ParameterServerClient],
) -> None:
    server = _server(2, synchronous=False)
    try:
        (a, model_a), (b, model_b) = (connect(server, rank, clients) for rank in (0, 1))
        start = server.snapshot().clone()
        _set_gradient(model_a, 1.0)
        a.push(model_a, 0.0, 1, stop_wanted=False)  # computed on version 0, applied as 0 -> 1
        _set_gradient(model_b, 1.0)
        b.push(model_b, 0.0, 1, stop_wanted=False)  # also on version 0: one update missed
        torch.testing.assert_close(server.snapshot(), start - 2.0)
        assert server.take_statistics().staleness == [0, 1]
        torch.testing.assert_close(
            torch.nn.utils.parameters_to_vector(model_b.parameters()), start - 2.0
        )
        for client in (a, b):
            client.done()
        server.wait_until_all_done()
    finally:
        server.close()


def test_sync_waits_for_every_worker_and_averages(clients: list[ParameterServerClient]) -> None:
    server = _server(2, synchronous=True)
    try:
        (a, model_a), (b, model_b) = (connect(server, rank, clients) for rank in (0, 1))
        start = server.snapshot().clone()
        _set_gradient(model_a, 1.0)
        pushed = threading.Thread(target=a.push, args=(model_a, 0.0, 1, False))
        pushed.start()
        pushed.join(0.2)
        assert pushed.is_alive()  # the round needs worker 1 too
        torch.testing.assert_close(server.snapshot(), start)
        _set_gradient(model_b, 3.0)
        b.push(model_b, 0.0, 1, stop_wanted=True)
        pushed.join(5)
        torch.testing.assert_close(server.snapshot(), start - 2.0)  # the mean of 1 and 3
        assert server.take_statistics().staleness == [0, 0]
        for client in (a, b):
            client.done()
        server.wait_until_all_done()
    finally:
        server.close()


def test_a_staleness_bound_holds_back_a_worker_that_runs_ahead(
    clients: list[ParameterServerClient],
) -> None:
    server = _server(2, synchronous=False, bound=1)
    try:
        (a, model_a), (b, model_b) = (connect(server, rank, clients) for rank in (0, 1))
        _set_gradient(model_a, 1.0)
        a.push(model_a, 0.0, 1, stop_wanted=False)  # one ahead of worker 1: allowed
        pushed = threading.Thread(target=a.push, args=(model_a, 0.0, 1, False))
        pushed.start()
        pushed.join(0.2)
        assert pushed.is_alive()  # two ahead: waits for worker 1
        _set_gradient(model_b, 1.0)
        b.push(model_b, 0.0, 1, stop_wanted=False)
        pushed.join(5)
        assert not pushed.is_alive()
        for client in (a, b):
            client.done()
        server.wait_until_all_done()
    finally:
        server.close()


def test_a_lost_worker_aborts_the_others(clients: list[ParameterServerClient]) -> None:
    server = _server(2, synchronous=True)
    try:
        (a, model_a), (b, _) = (connect(server, rank, clients) for rank in (0, 1))
        b.close()  # worker 1 dies without saying it is done
        _set_gradient(model_a, 1.0)
        with pytest.raises(ParameterServerError, match="lost worker 1"):
            a.push(model_a, 0.0, 1, stop_wanted=False)
        with pytest.raises(ParameterServerError, match="lost worker 1"):
            server.wait_until_all_done()
    finally:
        server.close()
