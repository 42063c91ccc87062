"""In-memory labelled tables, and the files that carry them to workers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import numpy.typing as npt

from scaletune.data._remote import filesystem, join_url, reading

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
    """A table written as two .npy files, which workers memory-map and slice; at a URL (str)
    each worker fetches only its own rows' byte range."""

    features: Path | str
    labels: Path | str
    source: str
    feature_names: tuple[str, ...] | None = None

    @classmethod
    def write(cls, table: Table, folder: Path | str) -> TableFiles:
        if isinstance(folder, str):
            features, labels = join_url(folder, "features.npy"), join_url(folder, "labels.npy")
            for url, array in ((features, table.features), (labels, table.labels)):
                with reading(url):
                    fs, path = filesystem(url)
                    with fs.open(path, "wb") as handle:
                        np.save(handle, array)
            return cls(features, labels, table.source, table.feature_names)
        folder.mkdir(parents=True, exist_ok=True)
        files = cls(
            folder / "features.npy", folder / "labels.npy", table.source, table.feature_names
        )
        np.save(files.features, table.features)
        np.save(files.labels, table.labels)
        return files

    def read_rows(self, start: int, stop: int) -> Table:
        if isinstance(self.features, str) and isinstance(self.labels, str):
            features = _remote_rows(self.features, start, stop)
            labels = _remote_rows(self.labels, start, stop)
            return Table(features, labels, self.source, self.feature_names)
        features = np.load(self.features, mmap_mode="r")
        labels = np.load(self.labels, mmap_mode="r")
        return Table(features, labels, self.source, self.feature_names).rows(start, stop)

    def n_rows(self) -> int:
        if isinstance(self.labels, str):
            with reading(self.labels):
                fs, path = filesystem(self.labels)
                with fs.open(path, "rb") as handle:
                    return _npy_header(handle)[0][0]
        return int(np.load(self.labels, mmap_mode="r").shape[0])


def _remote_rows(url: str, start: int, stop: int) -> FloatArray:
    """Rows [start, stop) of a C-ordered .npy file: its header, then one ranged read."""
    with reading(url):
        fs, path = filesystem(url)
        with fs.open(path, "rb") as handle:
            shape, dtype = _npy_header(handle)
            row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
            handle.seek(handle.tell() + start * row_bytes)
            data = handle.read((stop - start) * row_bytes)
    rows: FloatArray = np.frombuffer(data, dtype=dtype).reshape((stop - start, *shape[1:]))
    return rows.copy()  # writable, like a local table's rows


def _npy_header(handle: IO[bytes]) -> tuple[tuple[int, ...], np.dtype[np.float32]]:
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(handle)
    else:
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(handle)
    if fortran_order:  # never written so by TableFiles.write
        raise ValueError("Fortran-ordered .npy files cannot be read by rows")
    return tuple(shape), dtype


def shard_bounds(n_rows: int, world_size: int, rank: int) -> tuple[int, int]:
    """Contiguous rows of worker `rank`: sizes differ by at most one, like numpy.array_split."""
    base, extra = divmod(n_rows, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)
