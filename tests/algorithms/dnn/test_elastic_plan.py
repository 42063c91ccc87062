"""An elastic job's walk through the data: resized mid-epoch at any point, to any size, the
workers take every example of the epoch once."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from scaletune.algorithms.dnn._checkpoint import Position
from scaletune.algorithms.dnn._common import Examples
from scaletune.algorithms.dnn._elastic_plan import ElasticPlan
from scaletune.algorithms.dnn._hyperparameters import DNNHyperparameters

ROWS = 1000


def _plan(world_size: int, rank: int, batch: int = 16, accumulate: int = 1) -> ElasticPlan:
    settings = DNNHyperparameters(batch_size=batch, gradient_accumulation_steps=accumulate)
    return ElasticPlan(settings, seed=7, rank=rank, world_size=world_size, train_rows=ROWS)


SHARD = Examples(torch.zeros(ROWS, 1), torch.zeros(ROWS, dtype=torch.long))


def _walk(
    world_size: int, position: Position, updates: int | None, **settings: int
) -> tuple[list[np.ndarray], Position]:
    """Every rank's rows over `updates` updates (None: to the epoch's end), and the position
    after them, as each rank's own walk and close say (they must agree)."""
    taken: list[np.ndarray] = []
    ends: set[Position] = set()
    for rank in range(world_size):
        plan = _plan(world_size, rank, **settings)
        here = position
        for count, (index, micro_batches, seen) in enumerate(plan.walk(SHARD, position)):
            if updates is not None and count == updates:
                break
            assert index == here.index
            taken.extend(rows.numpy() for rows in micro_batches)
            here = plan.close(dataclasses.replace(here, index=index + 1), seen)
        ends.add(here)
    assert len(ends) == 1  # every rank at the same position
    return taken, ends.pop()


@pytest.mark.parametrize(
    ("sizes", "accumulate"),
    [((4, 3), 1), ((3, 4), 1), ((4, 1, 2), 1), ((2, 3), 2), ((5,), 3)],
    ids=["shrink", "grow", "shrink-twice-then-grow", "micro-batches", "one-size"],
)
def test_a_resized_epoch_takes_every_example_once(sizes: tuple[int, ...], accumulate: int) -> None:
    position = Position.start()
    taken: list[np.ndarray] = []
    for number, size in enumerate(sizes):
        last = number == len(sizes) - 1
        rows, position = _walk(size, position, None if last else 5, accumulate=accumulate)
        taken.extend(rows)
    everything = np.concatenate(taken)
    assert sorted(everything.tolist()) == list(range(ROWS))  # none skipped, none repeated
    assert position == dataclasses.replace(position, epoch=2, index=0, examples=0)


def test_the_order_is_the_clusters_size_free_and_each_update_takes_its_share() -> None:
    four, _ = _walk(4, Position.start(), 1)
    three, _ = _walk(3, Position.start(), 1)
    order = _plan(4, 0).order(1)
    assert np.array_equal(np.concatenate(four), order[:64])  # rank r's slice: the r-th of 16
    assert np.array_equal(np.concatenate(three), order[:48])
    assert not np.array_equal(_plan(4, 0).order(2), order)  # a fresh order every epoch


def test_the_epochs_last_update_takes_what_remains_and_an_empty_share_is_allowed() -> None:
    plan = _plan(4, 0)
    assert plan.updates_per_epoch == ROWS // 64
    last = list(plan.walk(SHARD, Position(1, 0, 0, examples=ROWS - 100)))
    assert len(last) == 1  # 100 rows: fewer than two updates' worth, one update
    assert [len(rows) for rows in last[0][1]] == [25]
    tiny = [
        next(_plan(4, rank).walk(SHARD, Position(1, 0, 0, examples=ROWS - 2)))[1][0].numel()
        for rank in range(4)
    ]
    assert tiny == [1, 1, 0, 0]  # two rows for four ranks: two take none


def test_epochs_done_counts_the_rows_behind_a_position() -> None:
    plan = _plan(3, 0)
    assert plan.epochs_done(Position(2, 3, 40, examples=ROWS // 4)) == pytest.approx(1.25)
