"""Which rows of its shard a worker trains on, batch by batch, each epoch."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt


def batches_per_epoch(train_rows: int, world_size: int, batch_size: int) -> int:
    """The same on every rank (shards differ by at most one row), so collectives line up."""
    smallest_shard = train_rows // world_size
    return max(1, -(-smallest_shard // batch_size))


def epoch_batches(
    shard_rows: int, n_batches: int, batch_size: int, *, seed: int, epoch: int, rank: int
) -> Iterator[npt.NDArray[np.int64]]:
    """A fresh permutation of the shard every epoch (as DistributedSampler.set_epoch does),
    cut into `n_batches` batches; the last one takes whatever rows remain, so none is skipped."""
    order = np.random.default_rng([seed, epoch, rank]).permutation(shard_rows)
    for index in range(n_batches):
        stop = (index + 1) * batch_size if index < n_batches - 1 else shard_rows
        yield order[index * batch_size : stop]
