from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scaletune.data import read_csv_table
from scaletune.errors import InvalidInputError


def _file(tmp_path: Path, text: str, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_label_first_no_header(tmp_path: Path) -> None:
    table = read_csv_table(_file(tmp_path, "1,0.5,2\n0,1.5,-3\n\n"))
    assert table.labels.tolist() == [1.0, 0.0]
    assert table.features.tolist() == [[0.5, 2.0], [1.5, -3.0]]
    assert table.features.dtype == np.float32


def test_a_folder_is_its_csv_files_in_name_order(tmp_path: Path) -> None:
    _file(tmp_path, "0,2\n", "b.csv")
    _file(tmp_path, "1,1\n", "a.csv")
    _file(tmp_path, "ignored", "notes.txt")
    assert read_csv_table(tmp_path).labels.tolist() == [1.0, 0.0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "is empty"),
        ("\n\n", "is empty"),
        ("1\n0\n", "has one column"),
        ("1,2,3\n0,4\n", "line 2 has 2 columns; line 1 has 3"),
        ("1,2,3\n0,4,5,6\n", "line 2 has 4 columns; line 1 has 3"),
        ("1,2\n0,abc\n", "line 2 column 2 is 'abc', not a number"),
        ("1,2\n0,\n", "line 2 column 2 is an empty value, not a number"),
        ("label,x\n1,2\n", "line 1 column 1 is 'label', not a number"),
        ("1,nan\n", "line 1 column 2 is NaN"),
    ],
)
def test_bad_files_are_named_with_line_and_column(tmp_path: Path, text: str, expected: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(InvalidInputError) as caught:
        read_csv_table(path)
    assert expected in str(caught.value)
    assert str(path) in str(caught.value)


def test_folders_need_matching_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"holds no \.csv files"):
        read_csv_table(tmp_path)
    _file(tmp_path, "1,2\n", "a.csv")
    _file(tmp_path, "1,2,3\n", "b.csv")
    with pytest.raises(InvalidInputError, match=r"different column counts: a.csv=2, b.csv=3"):
        read_csv_table(tmp_path)


def test_binary_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InvalidInputError, match="not a UTF-8 text CSV"):
        read_csv_table(path)
