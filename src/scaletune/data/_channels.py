"""Turn a job's channel specs into validated tables, before any worker starts."""

from __future__ import annotations

import threading
from pathlib import Path

from scaletune.data._bank_marketing import download_bank_marketing, prepare_bank_marketing
from scaletune.data._bundled import prepare_breast_cancer
from scaletune.data._csv import read_csv_table
from scaletune.data._images import (
    default_mnist_folder,
    download_mnist,
    prepare_digits,
    prepare_mnist,
)
from scaletune.data._table import Table
from scaletune.errors import InvalidInputError
from scaletune.spec import BuiltinDataset, ChannelName, ChannelSpec, ShardingMode, TrainingJobSpec


class PreparedDatasets:
    """Built-in datasets prepared once per owner (a controller): a tuning job's trials share
    them. Keyed by the source file's path, size and modification time, so an edit is seen."""

    def __init__(self) -> None:
        self._prepared: dict[tuple[object, ...], dict[str, Table]] = {}
        self._lock = threading.Lock()

    def get(self, dataset: BuiltinDataset, dataset_file: Path | None) -> dict[str, Table]:
        key: tuple[object, ...] = (dataset, dataset_file)
        if dataset_file is not None:
            stat = dataset_file.stat()
            key = (*key, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            if key not in self._prepared:
                self._prepared[key] = prepare_builtin(dataset, dataset_file)
            return self._prepared[key]


def load_channels(
    spec: TrainingJobSpec, datasets: PreparedDatasets | None = None
) -> dict[ChannelName, Table]:
    datasets = datasets or PreparedDatasets()
    tables: dict[ChannelName, Table] = {}
    for name, channel in spec.channels.items():
        tables[name] = _load_channel(name, channel, datasets)
    widths = {name: table.n_features for name, table in tables.items()}
    if len(set(widths.values())) > 1:
        shown = ", ".join(f"{name.value}={width + 1}" for name, width in widths.items())
        raise InvalidInputError(f"channels have different column counts: {shown}")
    for name, table in tables.items():
        if spec.sharding(name) is ShardingMode.SHARDED and table.n_rows < spec.instance_count:
            raise InvalidInputError(
                f"channel {name.value!r} has {table.n_rows} rows, fewer than "
                f"instance_count={spec.instance_count}: some workers would get no data"
            )
    return tables


def _load_channel(name: ChannelName, channel: ChannelSpec, datasets: PreparedDatasets) -> Table:
    if channel.path is not None:
        return read_csv_table(channel.path)
    assert channel.dataset is not None  # the spec guarantees one of path/dataset
    return datasets.get(channel.dataset, channel.dataset_file)[(channel.split or name).value]


def prepare_builtin(dataset: BuiltinDataset, dataset_file: Path | None) -> dict[str, Table]:
    if dataset is BuiltinDataset.BREAST_CANCER:
        return prepare_breast_cancer()
    if dataset is BuiltinDataset.DIGITS:
        return prepare_digits()
    if dataset is BuiltinDataset.MNIST:
        return prepare_mnist(dataset_file or download_mnist(default_mnist_folder()))
    return prepare_bank_marketing(dataset_file or download_bank_marketing())
