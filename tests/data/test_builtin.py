from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from scaletune.data import (
    Table,
    download_bank_marketing,
    prepare_bank_marketing,
    prepare_breast_cancer,
)
from scaletune.data._bank_marketing import SOURCE_MEMBER
from scaletune.errors import InvalidInputError


def test_bank_marketing_is_prepared_as_the_reference_does(bank_marketing_file: Path) -> None:
    splits = prepare_bank_marketing(bank_marketing_file)
    assert {name: table.n_rows for name, table in splits.items()} == {
        "train": 35_009,
        "validation": 2_060,
        "test": 4_119,
    }
    train = splits["train"]
    names = train.feature_names or ()
    assert "no_previous_contact" in names and "not_working" in names
    for dropped in ("duration", "euribor3m", "nr.employed", "y_yes", "y_no"):
        assert dropped not in names
    assert "job_student" in names  # one-hot encoded
    positives = sum(int(table.labels.sum()) for table in splits.values())
    assert positives == 4_640  # every y=yes row, once
    assert set(np.unique(train.labels)) == {0.0, 1.0}
    again = prepare_bank_marketing(bank_marketing_file)["train"]
    assert np.array_equal(again.features, train.features)  # seed 1729, deterministic


def test_bank_marketing_refuses_other_files(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("a;b\n1;2\n")
    with pytest.raises(InvalidInputError, match="missing columns"):
        prepare_bank_marketing(other)


def test_download_checks_the_sha256(bank_marketing_file: Path, tmp_path: Path) -> None:
    archive = tmp_path / "bank-additional.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.write(bank_marketing_file, SOURCE_MEMBER)
    got = download_bank_marketing(archive.as_uri(), tmp_path / "cache" / "bank.csv")
    assert got.read_bytes() == bank_marketing_file.read_bytes()

    tampered = tmp_path / "tampered.zip"
    with zipfile.ZipFile(tampered, "w") as bundle:
        bundle.writestr(SOURCE_MEMBER, "age;y\n1;no\n")
    with pytest.raises(InvalidInputError, match="has sha256"):
        download_bank_marketing(tampered.as_uri(), tmp_path / "cache2" / "bank.csv")
    assert not (tmp_path / "cache2" / "bank.csv").exists()
    with pytest.raises(InvalidInputError, match="could not download"):
        download_bank_marketing((tmp_path / "absent.zip").as_uri(), tmp_path / "c3" / "b.csv")


def test_breast_cancer_splits() -> None:
    splits = prepare_breast_cancer()
    assert sum(table.n_rows for table in splits.values()) == 569
    assert splits["train"].n_rows == 398
    assert splits["train"].n_features == 30


def test_prepared_datasets_are_reused_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import scaletune.data._channels as channels
    from scaletune.data import PreparedDatasets
    from scaletune.spec import BuiltinDataset

    datasets = PreparedDatasets()
    first = datasets.get(BuiltinDataset.BREAST_CANCER, None)
    assert datasets.get(BuiltinDataset.BREAST_CANCER, None) is first
    calls: list[Path | None] = []

    def counting_prepare(dataset: BuiltinDataset, file: Path | None) -> dict[str, Table]:
        calls.append(file)
        return first

    monkeypatch.setattr(channels, "prepare_builtin", counting_prepare)
    source = tmp_path / "bank.csv"
    source.write_text("x")
    datasets.get(BuiltinDataset.BANK_MARKETING, source)
    datasets.get(BuiltinDataset.BANK_MARKETING, source)
    source.write_text("changed, and longer")
    datasets.get(BuiltinDataset.BANK_MARKETING, source)
    assert calls == [source, source]
