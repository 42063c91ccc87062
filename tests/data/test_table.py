from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from scaletune.data import Table, TableFiles, shard_bounds


@pytest.mark.parametrize(("n_rows", "world_size"), [(10, 3), (3, 3), (35_009, 3), (7, 1), (5, 4)])
def test_shards_cover_every_row_once_with_sizes_within_one(n_rows: int, world_size: int) -> None:
    bounds = [shard_bounds(n_rows, world_size, rank) for rank in range(world_size)]
    assert bounds[0][0] == 0
    assert bounds[-1][1] == n_rows
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_table_files_round_trip_by_rows(tmp_path: Path) -> None:
    features = np.arange(20, dtype=np.float32).reshape(10, 2)
    table = Table(features, np.arange(10, dtype=np.float32), "src", ("a", "b"))
    files = TableFiles.write(table, tmp_path / "t")
    assert files.n_rows() == 10
    part = files.read_rows(3, 6)
    assert part.features.tolist() == features[3:6].tolist()
    assert part.labels.tolist() == [3.0, 4.0, 5.0]
    assert part.feature_names == ("a", "b")
