"""When the parameter server applies what it receives, and when a worker gets its reply.

`Synchronous`: one update per round, the mean of the round's gradients; a round waits for
every worker still training, or with `backup_workers` b for the first N - b of them (Chen et
al. 2016, "Revisiting distributed synchronous SGD"), the late ones dropped. `Asynchronous`:
each gradient is applied as it arrives; with `max_staleness` k (stale-synchronous parallel,
Ho et al. 2013) a worker more than k pushes ahead of the slowest waits for its reply."""

from __future__ import annotations

from dataclasses import dataclass

from scaletune.spec import DistributionSpec


@dataclass(frozen=True)
class Synchronous:
    backup_workers: int = 0

    @property
    def counts_epochs(self) -> bool:
        """Whether the server, not each worker's passes over its shard, closes the epochs:
        rounds that drop late gradients apply less than a whole round's."""
        return self.backup_workers > 0

    def needed(self, training: int) -> int:
        """How many gradients close a round, `training` workers still training."""
        return max(1, training - self.backup_workers)

    def describe(self) -> str:
        return f"backup_workers {self.backup_workers}" if self.backup_workers else "synchronous"


@dataclass(frozen=True)
class Asynchronous:
    max_staleness: int | None = None
    # Every push is an update: the job's end is the pushes of `epochs` passes over the data,
    # whichever workers make them, not a straggler's own passes over its shard.
    counts_epochs = True

    def holds(self, ahead: int) -> bool:
        """Whether a worker `ahead` pushes beyond the slowest waits for its reply."""
        return self.max_staleness is not None and ahead > self.max_staleness

    def describe(self) -> str:
        return f"max_staleness {self.max_staleness}"


ServerMode = Synchronous | Asynchronous


def server_mode(distribution: DistributionSpec) -> ServerMode:
    """The job's mode (`max_staleness = 0` runs the rounds of `mode = "sync"`)."""
    if not distribution.applies_asynchronously:
        return Synchronous(distribution.backup_workers)
    return Asynchronous(distribution.max_staleness)
