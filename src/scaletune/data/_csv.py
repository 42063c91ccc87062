"""CSV channels in the reference's layout: label in the first column, no header, numbers only."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import numpy as np
from fsspec import AbstractFileSystem

from scaletune.data._remote import filesystem, reading
from scaletune.data._table import Table
from scaletune.errors import InvalidInputError

# A file to read: the name messages use, and how to get its bytes.
_Source = tuple[str, Callable[[], bytes]]


def read_csv_table(location: Path | str) -> Table:
    """Read a CSV file, or every *.csv file of a folder in name order (one table); a str is a
    URL that fsspec opens (s3://bucket/train/ reads every .csv under that prefix)."""
    files = _remote_files(location) if isinstance(location, str) else _local_files(location)
    if not files:
        raise InvalidInputError(f"folder {str(location)!r} holds no .csv files")
    parts = [_read_one(name, read) for name, read in files]
    widths = {part.n_features for part in parts}
    if len(widths) > 1:
        raise InvalidInputError(
            f"files in {str(location)!r} have different column counts: "
            + ", ".join(f"{PurePosixPath(p.source).name}={p.n_features + 1}" for p in parts)
        )
    if len(parts) == 1:
        return parts[0]
    return Table(
        np.concatenate([p.features for p in parts]),
        np.concatenate([p.labels for p in parts]),
        str(location),
    )


def _local_files(path: Path) -> list[_Source]:
    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    return [(str(file), file.read_bytes) for file in files]


def _remote_files(url: str) -> list[_Source]:
    with reading(url):
        fs, root = filesystem(url)
        if fs.isdir(root):
            paths = sorted(fs.glob(root.rstrip("/") + "/*.csv"))
        elif fs.exists(root):
            paths = [root]
        else:
            raise InvalidInputError(f"{url!r} does not exist")
    return [(fs.unstrip_protocol(path), _reader(fs, path)) for path in paths]


def _reader(fs: AbstractFileSystem, path: str) -> Callable[[], bytes]:
    def read() -> bytes:
        with reading(fs.unstrip_protocol(path)):
            return bytes(fs.cat_file(path))

    return read


def _read_one(file: str, read: Callable[[], bytes]) -> Table:
    try:
        text = read().decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"{file!r} is not a UTF-8 text CSV file") from None
    except OSError as exc:
        raise InvalidInputError(f"{file!r} cannot be read: {exc.strerror}") from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise InvalidInputError(f"{file!r} is empty")
    width = lines[0][1].count(",") + 1
    if width < 2:
        raise InvalidInputError(f"{file!r} has one column; expected a label and features")
    for number, line in lines:
        if line.count(",") + 1 != width:
            raise InvalidInputError(
                f"{file!r} line {number} has {line.count(',') + 1} columns; "
                f"line {lines[0][0]} has {width}"
            )
    body = "\n".join(line for _, line in lines)
    try:
        import pandas as pd  # its CSV parser; loaded only when a CSV is read

        values = pd.read_csv(io.StringIO(body), header=None, dtype=np.float64).to_numpy()
    except ValueError:
        values = None
    if values is None or np.isnan(values).any():
        _raise_first_bad_cell(file, lines)
    assert values is not None  # _raise_first_bad_cell always raises
    return Table(
        np.ascontiguousarray(values[:, 1:], dtype=np.float32),
        np.ascontiguousarray(values[:, 0], dtype=np.float32),
        file,
    )


def _raise_first_bad_cell(file: str, lines: list[tuple[int, str]]) -> None:
    for number, line in lines:
        for column, cell in enumerate(line.split(","), 1):
            try:
                value = float(cell)
            except ValueError:
                shown = "an empty value" if not cell.strip() else f"{cell.strip()!r}"
                raise InvalidInputError(
                    f"{file!r} line {number} column {column} is {shown}, not a number"
                ) from None
            if value != value:  # NaN
                raise InvalidInputError(
                    f"{file!r} line {number} column {column} is NaN; missing values are "
                    "not supported in CSV channels"
                )
    raise InvalidInputError(f"{file!r} could not be parsed as numbers")
