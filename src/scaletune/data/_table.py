"""In-memory labelled tables, and the files that carry them to workers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Table:
    """Rows of numeric features with a label; `source` names where they came from, for messages."""

    features: FloatArray
    labels: FloatArray
    source: str
    feature_names: tuple[str, ...] | None = None

    @property
    def n_rows(self) -> int:
        return int(self.features.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.features.shape[1])

    def rows(self, start: int, stop: int) -> Table:
        return Table(
            np.ascontiguousarray(self.features[start:stop]),
            np.ascontiguousarray(self.labels[start:stop]),
            self.source,
            self.feature_names,
        )


@dataclass(frozen=True)
class TableFiles:
    """A table written as two .npy files, which workers memory-map and slice."""

    features: Path
    labels: Path
    source: str
    feature_names: tuple[str, ...] | None = None

    @classmethod
    def write(cls, table: Table, folder: Path) -> TableFiles:
        folder.mkdir(parents=True, exist_ok=True)
        files = cls(
            folder / "features.npy", folder / "labels.npy", table.source, table.feature_names
        )
        np.save(files.features, table.features)
        np.save(files.labels, table.labels)
        return files

    def read_rows(self, start: int, stop: int) -> Table:
        features = np.load(self.features, mmap_mode="r")
        labels = np.load(self.labels, mmap_mode="r")
        return Table(features, labels, self.source, self.feature_names).rows(start, stop)

    def n_rows(self) -> int:
        return int(np.load(self.labels, mmap_mode="r").shape[0])


def shard_bounds(n_rows: int, world_size: int, rank: int) -> tuple[int, int]:
    """Contiguous rows of worker `rank`: sizes differ by at most one, like numpy.array_split."""
    base, extra = divmod(n_rows, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)
