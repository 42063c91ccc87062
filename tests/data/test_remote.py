"""Channels and staged tables at object-storage URLs (a local S3: moto's server), through
fsspec, and the errors users see when a URL does not serve."""

from __future__ import annotations

from pathlib import Path

import fsspec
import numpy as np
import pytest

from scaletune.data import Table, TableFiles, read_csv_table
from scaletune.errors import InvalidInputError
from scaletune.spec import ChannelName, load_training_spec, training_spec_from_dict


def _put(url: str, text: str) -> str:
    with fsspec.open(url, "w") as handle:
        handle.write(text)
    return url


def test_a_csv_at_a_url_reads_as_the_same_file_does_locally(s3_bucket: str, tmp_path: Path) -> None:
    text = "1,0.5,2\n0,1.5,-3\n"
    (tmp_path / "data.csv").write_text(text)
    remote = read_csv_table(_put(f"{s3_bucket}/train/data.csv", text))
    local = read_csv_table(tmp_path / "data.csv")
    assert remote.features.tolist() == local.features.tolist()
    assert remote.labels.tolist() == local.labels.tolist()
    assert remote.source == f"{s3_bucket}/train/data.csv"


def test_a_prefix_is_its_csv_files_in_name_order(s3_bucket: str) -> None:
    _put(f"{s3_bucket}/train/b.csv", "0,2\n")
    _put(f"{s3_bucket}/train/a.csv", "1,1\n")
    _put(f"{s3_bucket}/train/notes.txt", "ignored")
    assert read_csv_table(f"{s3_bucket}/train").labels.tolist() == [1.0, 0.0]
    assert read_csv_table(f"{s3_bucket}/train/").labels.tolist() == [1.0, 0.0]


def test_bad_cells_are_named_with_the_url(s3_bucket: str) -> None:
    url = _put(f"{s3_bucket}/bad.csv", "1,2\n0,abc\n")
    with pytest.raises(InvalidInputError, match=r"bad\.csv' line 2 column 2 is 'abc'"):
        read_csv_table(url)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://{bucket}/missing.csv", r"'s3://test-\w+/missing\.csv' does not exist"),
        ("s3://no-such-bucket-anywhere/x.csv", r"'s3://no-such-bucket-anywhere/x\.csv'"),
        ("nosuchprotocol://a/b.csv", r"'nosuchprotocol://a/b\.csv' cannot be opened: "),
    ],
)
def test_urls_that_do_not_serve_give_one_line(s3_bucket: str, url: str, expected: str) -> None:
    with pytest.raises(InvalidInputError, match=expected) as caught:
        read_csv_table(url.format(bucket=s3_bucket.removeprefix("s3://")))
    assert "\n" not in str(caught.value)


def test_each_worker_fetches_only_its_rows_of_a_staged_table(s3_bucket: str) -> None:
    features = np.arange(3 * 1000, dtype=np.float32).reshape(1000, 3)
    table = Table(features, np.arange(1000, dtype=np.float32), "src", ("a", "b", "c"))
    files = TableFiles.write(table, f"{s3_bucket}/staging/train")
    assert isinstance(files.features, str)
    assert files.n_rows() == 1000
    part = files.read_rows(334, 667)
    assert part.features.tolist() == features[334:667].tolist()
    assert part.labels.tolist() == list(range(334, 667))
    assert part.feature_names == ("a", "b", "c")
    assert part.features.flags.writeable


def test_the_spec_keeps_urls_as_text_and_resolves_only_local_paths(tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text(
        'algorithm = "xgboost"\n'
        "[channels]\n"
        'train = "s3://bucket/train/"\n'  # not checked here: reading it needs the network
        "[cluster]\n"
        'staging = "shared/staging"\n'
    )
    spec = load_training_spec(job)
    assert spec.channels[ChannelName.TRAIN].path == "s3://bucket/train/"
    assert spec.cluster.staging == tmp_path / "shared" / "staging"
    remote = load_training_spec(job, ["cluster.staging=gs://bucket/prefix"])
    assert remote.cluster.staging == "gs://bucket/prefix"


def test_a_local_path_that_does_not_exist_is_still_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        training_spec_from_dict(
            {"algorithm": "xgboost", "channels": {"train": {"path": str(tmp_path / "none")}}}
        )
