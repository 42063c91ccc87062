"""CSV channels in the reference's layout: label in the first column, no header, numbers only."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from scaletune.data._table import Table
from scaletune.errors import InvalidInputError


def read_csv_table(path: Path) -> Table:
    """Read a CSV file, or every *.csv file of a folder in name order (one table)."""
    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    if not files:
        raise InvalidInputError(f"folder {str(path)!r} holds no .csv files")
    parts = [_read_one(file) for file in files]
    widths = {part.n_features for part in parts}
    if len(widths) > 1:
        raise InvalidInputError(
            f"files in {str(path)!r} have different column counts: "
            + ", ".join(f"{Path(p.source).name}={p.n_features + 1}" for p in parts)
        )
    if len(parts) == 1:
        return parts[0]
    return Table(
        np.concatenate([p.features for p in parts]),
        np.concatenate([p.labels for p in parts]),
        str(path),
    )


def _read_one(file: Path) -> Table:
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"{str(file)!r} is not a UTF-8 text CSV file") from None
    except OSError as exc:
        raise InvalidInputError(f"{str(file)!r} cannot be read: {exc.strerror}") from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise InvalidInputError(f"{str(file)!r} is empty")
    width = lines[0][1].count(",") + 1
    if width < 2:
        raise InvalidInputError(f"{str(file)!r} has one column; expected a label and features")
    for number, line in lines:
        if line.count(",") + 1 != width:
            raise InvalidInputError(
                f"{str(file)!r} line {number} has {line.count(',') + 1} columns; "
                f"line {lines[0][0]} has {width}"
            )
    body = "\n".join(line for _, line in lines)
    try:
        values = pd.read_csv(io.StringIO(body), header=None, dtype=np.float64).to_numpy()
    except ValueError:
        values = None
    if values is None or np.isnan(values).any():
        _raise_first_bad_cell(file, lines)
    assert values is not None  # _raise_first_bad_cell always raises
    return Table(
        np.ascontiguousarray(values[:, 1:], dtype=np.float32),
        np.ascontiguousarray(values[:, 0], dtype=np.float32),
        str(file),
    )


def _raise_first_bad_cell(file: Path, lines: list[tuple[int, str]]) -> None:
    for number, line in lines:
        for column, cell in enumerate(line.split(","), 1):
            try:
                value = float(cell)
            except ValueError:
                shown = "an empty value" if not cell.strip() else f"{cell.strip()!r}"
                raise InvalidInputError(
                    f"{str(file)!r} line {number} column {column} is {shown}, not a number"
                ) from None
            if value != value:  # NaN
                raise InvalidInputError(
                    f"{str(file)!r} line {number} column {column} is NaN; missing values are "
                    "not supported in CSV channels"
                )
    raise InvalidInputError(f"{str(file)!r} could not be parsed as numbers")
