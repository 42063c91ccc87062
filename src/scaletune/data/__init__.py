"""Datasets: CSV channels (local or at URLs), built-in datasets, and the per-worker shards of
them.

Names load on first use: a path helper does not load numpy and every dataset's reader."""

from typing import TYPE_CHECKING

from scaletune._lazy import lazy_names

if TYPE_CHECKING:
    from scaletune.data._bank_marketing import download_bank_marketing, prepare_bank_marketing
    from scaletune.data._bundled import prepare_breast_cancer
    from scaletune.data._channels import PreparedDatasets, load_channels, prepare_builtin
    from scaletune.data._csv import read_csv_table
    from scaletune.data._idx import IMAGES_MAGIC, LABELS_MAGIC, read_idx
    from scaletune.data._images import download_mnist, prepare_digits, prepare_mnist
    from scaletune.data._remote import (
        filesystem,
        get_folder,
        join_url,
        put_folder,
        reading,
        remove_url,
    )
    from scaletune.data._table import Table, TableFiles, shard_bounds

__getattr__ = lazy_names(__name__)
__all__ = [
    "IMAGES_MAGIC",
    "LABELS_MAGIC",
    "PreparedDatasets",
    "Table",
    "TableFiles",
    "download_bank_marketing",
    "download_mnist",
    "filesystem",
    "get_folder",
    "join_url",
    "load_channels",
    "prepare_bank_marketing",
    "prepare_breast_cancer",
    "prepare_builtin",
    "prepare_digits",
    "prepare_mnist",
    "put_folder",
    "read_csv_table",
    "read_idx",
    "reading",
    "remove_url",
    "shard_bounds",
]
