"""The parameter server in one process: what sync, async, a staleness bound and backup
workers mean."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector

from scaletune.algorithms.dnn import LearningRateScaling, LearningRateSchedule
from scaletune.algorithms.dnn._pace import AppliedPace
from scaletune.algorithms.dnn._parameter_server import ParameterServer
from scaletune.algorithms.dnn._ps_client import ParameterServerClient
from scaletune.algorithms.dnn._ps_modes import Asynchronous, ServerMode, Synchronous
from scaletune.algorithms.dnn._ps_updates import Pushed, ServerUpdates
from scaletune.algorithms.dnn._ps_wire import ParameterServerError
from tests.algorithms.dnn.servers import connect, finish, start_server, tiny_model


def _server(world_size: int, mode: ServerMode, straggler_seconds: float = 60.0) -> ParameterServer:
    model = tiny_model()
    updates = ServerUpdates.constant(model, torch.optim.SGD(model.parameters(), lr=1.0), 1.0)
    return start_server(model, updates, world_size, mode, straggler_seconds)


def _set_gradient(model: nn.Module, value: float) -> None:
    for parameter in model.parameters():
        parameter.grad = torch.full_like(parameter, value)


def _pushing(client: ParameterServerClient, model: nn.Module) -> threading.Thread:
    """A push whose reply the test waits for (it may be held)."""
    pushed = threading.Thread(target=client.push, args=(model, 0.0, 1, False))
    pushed.start()
    return pushed


def test_async_applies_each_push_and_measures_staleness(
    clients: list[ParameterServerClient],
) -> None:
    server = _server(2, Asynchronous())
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
        finish(server, a, b)
    finally:
        server.close()


def test_sync_waits_for_every_worker_and_averages(clients: list[ParameterServerClient]) -> None:
    server = _server(2, Synchronous())
    try:
        (a, model_a), (b, model_b) = (connect(server, rank, clients) for rank in (0, 1))
        start = server.snapshot().clone()
        _set_gradient(model_a, 1.0)
        pushed = _pushing(a, model_a)
        pushed.join(0.2)
        assert pushed.is_alive()  # the round needs worker 1 too
        torch.testing.assert_close(server.snapshot(), start)
        _set_gradient(model_b, 3.0)
        b.push(model_b, 0.0, 1, stop_wanted=True)
        pushed.join(5)
        torch.testing.assert_close(server.snapshot(), start - 2.0)  # the mean of 1 and 3
        assert server.take_statistics().staleness == [0, 0]
        finish(server, a, b)
    finally:
        server.close()


def test_a_staleness_bound_holds_back_a_worker_that_runs_ahead(
    clients: list[ParameterServerClient],
) -> None:
    server = _server(2, Asynchronous(max_staleness=1))
    try:
        (a, model_a), (b, model_b) = (connect(server, rank, clients) for rank in (0, 1))
        _set_gradient(model_a, 1.0)
        a.push(model_a, 0.0, 1, stop_wanted=False)  # one ahead of worker 1: allowed
        pushed = _pushing(a, model_a)
        pushed.join(0.2)
        assert pushed.is_alive()  # two ahead: waits for worker 1
        _set_gradient(model_b, 1.0)
        b.push(model_b, 0.0, 1, stop_wanted=False)
        pushed.join(5)
        assert not pushed.is_alive()
        finish(server, a, b)
    finally:
        server.close()


def test_a_lost_worker_aborts_the_others(clients: list[ParameterServerClient]) -> None:
    server = _server(2, Synchronous())
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


def test_a_round_goes_on_with_the_first_n_minus_b_and_drops_the_late_gradient(
    clients: list[ParameterServerClient],
) -> None:
    server = _server(3, Synchronous(backup_workers=1))
    try:
        (a, model_a), (b, model_b), (late, model_late) = (
            connect(server, rank, clients) for rank in (0, 1, 2)
        )
        start = server.snapshot().clone()
        _set_gradient(model_a, 1.0)
        first = _pushing(a, model_a)
        first.join(0.2)
        assert first.is_alive()  # 1 of the 2 a round needs
        _set_gradient(model_b, 3.0)
        b.push(model_b, 0.0, 1, stop_wanted=False)  # the second: the round goes on
        first.join(5)
        torch.testing.assert_close(server.snapshot(), start - 2.0)  # the mean of 1 and 3
        # Worker 2's gradient, computed on the weights of the round that went on without it,
        # comes late: dropped (never applied to the new weights), and it gets those at once.
        _set_gradient(model_late, 100.0)
        late.push(model_late, 0.0, 1, stop_wanted=False)
        torch.testing.assert_close(server.snapshot(), start - 2.0)
        torch.testing.assert_close(
            torch.nn.utils.parameters_to_vector(model_late.parameters()), start - 2.0
        )
        statistics = server.take_statistics()
        assert (statistics.dropped, statistics.staleness) == (1, [0, 0])
        assert statistics.metrics()["ps:dropped"] == 1.0
        finish(server, a, b, late)
    finally:
        server.close()


def test_a_bound_holds_a_worker_past_k_ahead_and_says_whom_it_waits_for(
    clients: list[ParameterServerClient], capsys: pytest.CaptureFixture[str]
) -> None:
    server = _server(2, Asynchronous(max_staleness=2), straggler_seconds=0.1)
    try:
        (a, model_a), (b, model_b) = (connect(server, rank, clients) for rank in (0, 1))
        _set_gradient(model_a, 1.0)
        for _ in range(2):  # up to k = 2 ahead of worker 1 (at 0): no wait
            a.push(model_a, 0.0, 1, stop_wanted=False)
        held = _pushing(a, model_a)  # the third: more than k ahead
        held.join(1.0)
        assert held.is_alive()
        assert "parameter server: worker 0 waits at push 3 for worker 1, at 0 pushes " in (
            capsys.readouterr().err
        )
        _set_gradient(model_b, 1.0)
        b.push(model_b, 0.0, 1, stop_wanted=False)
        held.join(5)
        assert not held.is_alive()
        finish(server, a, b)
    finally:
        server.close()


def test_a_round_waiting_on_a_straggler_says_so_once(
    clients: list[ParameterServerClient], capsys: pytest.CaptureFixture[str]
) -> None:
    server = _server(3, Synchronous(), straggler_seconds=0.1)
    try:
        (a, model_a), (b, model_b), (slow, model_slow) = (
            connect(server, rank, clients) for rank in (0, 1, 2)
        )
        for model in (model_a, model_b):
            _set_gradient(model, 1.0)
        waiting = [_pushing(a, model_a), _pushing(b, model_b)]
        for pushed in waiting:
            pushed.join(1.0)
        lines = capsys.readouterr().err.splitlines()
        assert lines == ["parameter server: round 1 waits for worker 2 (2 of 3 gradients in)"]
        _set_gradient(model_slow, 1.0)
        slow.push(model_slow, 0.0, 1, stop_wanted=False)
        for pushed in waiting:
            pushed.join(5)
        finish(server, a, b, slow)
    finally:
        server.close()


def test_a_round_short_of_its_backup_workers_counts_as_the_share_it_applied() -> None:
    # Linear scaling over 3 workers (lr 0.1 x 3); a round of 2 gradients is a batch 2/3 as
    # big: its rate is 0.1 x 2, and it makes 2/3 of an update's progress. An epoch of 3
    # whole rounds so closes after 5 rounds of 2 (4.5 needed), not after 3.
    model = tiny_model()
    pace = AppliedPace(LearningRateSchedule(0.1, 0.3, 0), epochs=2, updates_per_epoch=3)
    updates = ServerUpdates(
        model,
        torch.optim.SGD(model.parameters(), lr=1.0),
        pace,
        scaling=LearningRateScaling.LINEAR,
    )
    start = parameters_to_vector(model.parameters()).detach().clone()
    one = Pushed(np.ones(2, dtype=np.float32))
    closed = []
    for _ in range(6):
        updates.apply_round([one, one], of=3)
        closed.append(updates.reached())
    torch.testing.assert_close(
        parameters_to_vector(model.parameters()).detach(), start - 6 * 0.2, rtol=0, atol=1e-6
    )
    assert updates.progress == pytest.approx(4.0)
    assert closed == [0, 0, 0, 0, 1, 1]
    assert not updates.finished
    updates.apply_round([one, one, one], of=3)  # a whole round: rate 0.3, progress 1
    assert (updates.reached(), updates.finished) == (1, False)
    updates.apply_round([one, one, one], of=3)
    assert (updates.reached(), updates.finished) == (2, True)


def _counting_server(epochs: int, updates_per_epoch: int) -> ParameterServer:
    """An asynchronous server of 2 workers that counts the job's epochs in pushes applied
    (lr 1: each push of a gradient of ones takes 1 off every weight)."""
    model = tiny_model()
    pace = AppliedPace(LearningRateSchedule(1.0, 1.0, 0), epochs, updates_per_epoch)
    updates = ServerUpdates(model, torch.optim.SGD(model.parameters(), lr=1.0), pace)
    return start_server(model, updates, 2, Asynchronous())


def test_asynchronously_the_job_ends_with_its_pushes_whichever_workers_made_them(
    clients: list[ParameterServerClient],
) -> None:
    # One epoch of 2 workers x 2 batches: 4 pushes. Worker 0 makes all 4 (worker 1, a
    # straggler, none): the job is done, and worker 1's late push is not applied.
    server = _counting_server(epochs=1, updates_per_epoch=4)
    try:
        (fast, model_fast), (late, model_late) = (connect(server, rank, clients) for rank in (0, 1))
        _set_gradient(model_fast, 1.0)
        stops = [fast.push(model_fast, 0.0, 1, stop_wanted=False) for _ in range(4)]
        assert stops == [False, False, False, True]
        assert (server.reached(), server.finished) == (1, True)
        done = server.snapshot().clone()
        _set_gradient(model_late, 1.0)
        assert late.push(model_late, 0.0, 1, stop_wanted=False)  # told to stop at once
        torch.testing.assert_close(server.snapshot(), done)  # and its gradient not applied
        finish(server, fast, late)
    finally:
        server.close()


def test_every_epoch_other_workers_close_is_kept_with_the_weights_it_closed_on(
    clients: list[ParameterServerClient],
) -> None:
    # Epochs of 2 pushes. Rank 0 (the one that reports) computes while worker 1 makes 4:
    # two epochs close before rank 0 looks, and each is there with its own weights.
    server = _counting_server(epochs=2, updates_per_epoch=2)
    try:
        (chief, model_chief), (other, model_other) = (
            connect(server, rank, clients) for rank in (0, 1)
        )
        start = server.snapshot().clone()
        _set_gradient(model_other, 1.0)
        stops = [other.push(model_other, 0.5, 1, stop_wanted=False) for _ in range(4)]
        assert stops == [False, False, False, True]
        closed = server.take_closed_epochs()
        assert [epoch.epoch for epoch in closed] == [1, 2]
        torch.testing.assert_close(closed[0].weights, start - 2.0)
        torch.testing.assert_close(closed[1].weights, start - 4.0)
        assert [epoch.statistics.metrics()["train:loss"] for epoch in closed] == [0.5, 0.5]
        assert server.take_closed_epochs() == []  # taken once
        assert chief.push(model_chief, 0.0, 1, stop_wanted=False)  # the job is done
        finish(server, chief, other)
    finally:
        server.close()
