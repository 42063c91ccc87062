"""Datasets: CSV channels, built-in datasets, and the per-worker shards of them."""

from scaletune.data._bank_marketing import download_bank_marketing, prepare_bank_marketing
from scaletune.data._bundled import prepare_breast_cancer
from scaletune.data._channels import PreparedDatasets, load_channels, prepare_builtin
from scaletune.data._csv import read_csv_table
from scaletune.data._table import Table, TableFiles, shard_bounds

__all__ = [
    "PreparedDatasets",
    "Table",
    "TableFiles",
    "download_bank_marketing",
    "load_channels",
    "prepare_bank_marketing",
    "prepare_breast_cancer",
    "prepare_builtin",
    "read_csv_table",
    "shard_bounds",
]
