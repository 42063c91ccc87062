"""How the workers of an elastic job walk through the data, so that a resize mid-epoch
neither skips nor repeats an example.

Each epoch has one order of the whole channel (a function of seed and epoch, not of the
cluster), and every worker holds the whole channel, as PyTorch's DistributedSampler has it.
An update at N workers with A micro-batches of B rows takes the next N x A x B rows of that
order: rank r's micro-batch m is the (m x N + r)-th slice of B. The position in the epoch is
the count of rows taken so far, which means the same at any size: an attempt at another size
goes on from the checkpoint's count. The epoch's last update takes all that remains (fewer
than two updates' worth), split as evenly as it goes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from ._checkpoint import Position
from ._common import Examples, Plan


@dataclass(frozen=True)
class ElasticPlan(Plan):
    @property
    def elastic(self) -> bool:
        return True

    @property
    def update_rows(self) -> int:
        """Rows one update takes from the epoch's order, over every worker."""
        settings = self.hyperparameters
        return self.world_size * settings.gradient_accumulation_steps * settings.batch_size

    @property
    def updates_per_epoch(self) -> int:
        return max(1, self.train_rows // self.update_rows)

    def order(self, epoch: int) -> npt.NDArray[np.int64]:
        """The epoch's order of the whole channel: the same at every size."""
        return np.random.default_rng([self.seed, epoch]).permutation(self.train_rows)

    def walk(
        self, shard: Examples, position: Position
    ) -> Iterator[tuple[int, list[torch.Tensor], int | None]]:
        order = self.order(position.epoch)
        seen = position.examples or 0
        index = position.index
        parts = self.world_size * self.hyperparameters.gradient_accumulation_steps
        while seen < self.train_rows:
            remaining = self.train_rows - seen
            take = remaining if remaining < 2 * self.update_rows else self.update_rows
            slices = np.array_split(order[seen : seen + take], parts)
            # Micro-batch m of rank r: slice m x N + r.
            mine = slices[self.rank :: self.world_size]
            seen += take
            yield index, [torch.from_numpy(np.ascontiguousarray(rows)) for rows in mine], seen
            index += 1

    def close(self, position: Position, seen: int | None) -> Position:
        assert seen is not None  # walk gives it with every update
        if seen >= self.train_rows:
            return dataclasses.replace(position, epoch=position.epoch + 1, index=0, examples=0)
        return dataclasses.replace(position, examples=seen)

    def epochs_done(self, position: Position) -> float:
        return position.epoch - 1 + (position.examples or 0) / self.train_rows
