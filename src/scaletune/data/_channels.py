"""Turn a job's channel specs into validated tables, before any worker starts."""

from __future__ import annotations

from pathlib import Path

from scaletune.data._bank_marketing import download_bank_marketing, prepare_bank_marketing
from scaletune.data._bundled import prepare_breast_cancer
from scaletune.data._csv import read_csv_table
from scaletune.data._table import Table
from scaletune.errors import InvalidInputError
from scaletune.spec import BuiltinDataset, ChannelName, ChannelSpec, ShardingMode, TrainingJobSpec


def load_channels(spec: TrainingJobSpec) -> dict[ChannelName, Table]:
    tables: dict[ChannelName, Table] = {}
    prepared: dict[tuple[BuiltinDataset, Path | None], dict[str, Table]] = {}
    for name, channel in spec.channels.items():
        tables[name] = _load_channel(name, channel, prepared)
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


def _load_channel(
    name: ChannelName,
    channel: ChannelSpec,
    prepared: dict[tuple[BuiltinDataset, Path | None], dict[str, Table]],
) -> Table:
    if channel.path is not None:
        return read_csv_table(channel.path)
    assert channel.dataset is not None  # the spec guarantees one of path/dataset
    key = (channel.dataset, channel.dataset_file)
    if key not in prepared:
        prepared[key] = prepare_builtin(channel.dataset, channel.dataset_file)
    split = (channel.split or name).value
    return prepared[key][split]


def prepare_builtin(dataset: BuiltinDataset, dataset_file: Path | None) -> dict[str, Table]:
    if dataset is BuiltinDataset.BREAST_CANCER:
        return prepare_breast_cancer()
    return prepare_bank_marketing(dataset_file or download_bank_marketing())
