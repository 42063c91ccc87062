"""All-reduce rounds with backup workers, three ranks in one process: a real store and real
gloo groups, each rank's round thread its own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import torch
import torch.distributed as dist

from scaletune.algorithms.dnn._backup_rounds import (
    BackupRounds,
    BackupRoundsError,
    Contribution,
    ShardPlace,
)
from scaletune.cluster import free_port

RANKS = 3


def _ranks(rounds: int, timeout: float = 20.0) -> Iterator[list[BackupRounds]]:
    port = free_port()
    wait = timedelta(seconds=timeout)
    server = dist.TCPStore("127.0.0.1", port, RANKS, True, timeout=wait, wait_for_workers=False)

    def connect() -> dist.Store:
        return dist.TCPStore("127.0.0.1", port, RANKS, False, timeout=wait)

    groups: dict[int, Any] = {}  # gloo backends (their stubs lack allreduce)

    def join(rank: int) -> None:  # a group's set-up waits for every rank
        groups[rank] = dist.ProcessGroupGloo(dist.PrefixStore("g", connect()), rank, RANKS, wait)

    joining = [threading.Thread(target=join, args=(rank,)) for rank in range(RANKS)]
    for thread in joining:
        thread.start()
    for thread in joining:
        thread.join()

    def reducer(rank: int) -> Callable[[torch.Tensor], None]:
        return lambda tensor: groups[rank].allreduce([tensor]).wait()

    sides = [
        BackupRounds(
            claims=connect(),
            waits=connect(),
            reduce=reducer(rank),
            rank=rank,
            world_size=RANKS,
            needed=RANKS - 1,
            size=2,
            first=0,
            end=rounds,
            timeout=wait,
            place=ShardPlace(1, 0),
        )
        for rank in range(RANKS)
    ]
    for side in sides:
        side.__enter__()
    yield sides
    for side in sides:
        side.__exit__(None, None, None)
    # The groups' and the store's listening sockets close with them.
    sides.clear()
    groups.clear()
    del server


@pytest.fixture
def ranks() -> Iterator[list[BackupRounds]]:
    yield from _ranks(rounds=3)


def _gradient(value: float) -> Contribution:
    return Contribution(torch.full((2,), value), loss_sum=value, examples=1)


def test_a_round_takes_the_first_n_minus_b_and_a_late_gradient_is_never_applied(
    ranks: list[BackupRounds],
) -> None:
    zero, one, two = ranks
    zero.note(stop=False, checkpoint_due=False, place=ShardPlace(1, 1))
    assert zero.offer(0, _gradient(1.0))
    assert not two.taken_without_this_rank(0)  # one gradient of the two it needs
    one.note(stop=False, checkpoint_due=False, place=ShardPlace(1, 1))
    assert one.offer(0, _gradient(3.0))
    first = [side.result(0) for side in ranks]
    # Every rank gets the mean of the two, rank 2 too, which had not offered.
    for result in first:
        assert result is not None
        torch.testing.assert_close(result.mean, torch.full((2,), 2.0))
        assert (result.taken, result.loss_sum, result.dropped) == (2, 4.0, 0)
    # Rank 2 has computed nothing yet: its place is where it started.
    assert first[0] is not None
    assert first[0].places == (ShardPlace(1, 1), ShardPlace(1, 1), ShardPlace(1, 0))
    # Rank 2's gradient for round 0 comes after the round: dropped, and counted in the next.
    assert two.taken_without_this_rank(0)
    assert not two.offer(0, _gradient(100.0))
    two.note(stop=False, checkpoint_due=True, place=ShardPlace(1, 2))
    assert two.offer(1, _gradient(5.0))
    assert zero.offer(1, _gradient(7.0))
    assert one.taken_without_this_rank(1)  # full: rank 1 skips to its result
    assert not one.offer(1, _gradient(100.0))
    second = [side.result(1) for side in ranks]
    for result in second:
        assert result is not None
        torch.testing.assert_close(result.mean, torch.full((2,), 6.0))  # no 100 in it
        # Rank 2's drop; rank 1's too where it came before rank 1 closed the round.
        assert result.dropped in (1, 2)
        assert (result.checkpoint_due, result.stop) == (True, False)
        assert result.places[2] == ShardPlace(1, 2)
    # Round 2, the last: nothing of either late gradient applied.
    assert one.offer(2, _gradient(-1.0)) and two.offer(2, _gradient(1.0))
    third = [side.result(2) for side in ranks]
    for result, before in zip(third, second, strict=True):
        assert result is not None and before is not None
        torch.testing.assert_close(result.mean, torch.zeros(2))
        assert result.dropped + before.dropped == 2  # each late gradient counted once
        assert not result.checkpoint_due  # the wish was taken by the round before
    assert all(side.taken_without_this_rank(3) and side.result(3) is None for side in ranks)


def test_a_stop_a_rank_wants_ends_the_rounds_after_the_round_it_reaches(
    ranks: list[BackupRounds],
) -> None:
    zero, one, two = ranks
    two.note(stop=True, checkpoint_due=False, place=ShardPlace(1, 0))  # two never offers
    assert zero.offer(0, _gradient(1.0)) and one.offer(0, _gradient(1.0))
    assert all(result is not None and result.stop for result in (s.result(0) for s in ranks))
    assert [side.result(1) for side in ranks] == [None, None, None]
    assert not zero.offer(1, _gradient(1.0))


def test_a_round_that_never_fills_fails_on_every_rank_naming_it() -> None:
    sides = _ranks(rounds=3, timeout=0.5)
    ranks = next(sides)
    try:
        ranks[0].offer(0, _gradient(1.0))  # one of the two needed: the others are gone
        for side in ranks:
            with pytest.raises(BackupRoundsError, match=r"round 0: fewer than 2 of 3 gradients"):
                side.result(0)
    finally:
        next(sides, None)
