"""UCI bank marketing, prepared as the reference notebook does (REFERENCE.md section 2)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from scaletune.data._download import fetch_zip_member
from scaletune.data._table import Table
from scaletune.errors import InvalidInputError

SOURCE_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/00222/bank-additional.zip"
SOURCE_MEMBER = "bank-additional/bank-additional-full.csv"
SOURCE_SHA256 = "74adfc578bf77a7ff4bb1ba4a9f8709d9e3c6907342959c2c8416847e0afb4d8"

SHUFFLE_SEED = 1729
SPLIT_FRACTIONS = (0.85, 0.05, 0.10)  # train, validation, test
DROPPED = (
    "duration",
    "emp.var.rate",
    "cons.price.idx",
    "cons.conf.idx",
    "euribor3m",
    "nr.employed",
)
NOT_WORKING_JOBS = ("student", "retired", "unemployed")


def default_cache_file() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "scaletune" / "bank-additional-full.csv"


def download_bank_marketing(url: str = SOURCE_URL, destination: Path | None = None) -> Path:
    return fetch_zip_member(url, SOURCE_MEMBER, SOURCE_SHA256, destination or default_cache_file())


def prepare_bank_marketing(file: Path) -> dict[str, Table]:
    """Indicator columns, one-hot, dropped columns, shuffle with seed 1729, 85/5/10 split."""
    import pandas as pd  # heavy; only this dataset needs it

    try:
        raw = pd.read_csv(file, sep=";")
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{str(file)!r} is not the UCI bank marketing CSV: {exc}") from None
    missing = {"pdays", "job", "y", *DROPPED} - set(raw.columns)
    if missing:
        raise InvalidInputError(
            f"{str(file)!r} is not the UCI bank marketing CSV (';'-separated): "
            f"missing columns {sorted(missing)}"
        )
    raw["no_previous_contact"] = (raw["pdays"] == 999).astype(np.int64)
    raw["not_working"] = raw["job"].isin(NOT_WORKING_JOBS).astype(np.int64)
    encoded = pd.get_dummies(raw).drop(columns=list(DROPPED))
    shuffled = encoded.sample(frac=1, random_state=SHUFFLE_SEED)
    n = len(shuffled)
    cut_train = int(SPLIT_FRACTIONS[0] * n)
    cut_validation = int((SPLIT_FRACTIONS[0] + SPLIT_FRACTIONS[1]) * n)
    labels = shuffled["y_yes"].to_numpy(dtype=np.float32)
    features_frame = shuffled.drop(columns=["y_no", "y_yes"])
    features = features_frame.to_numpy(dtype=np.float32)
    names = tuple(str(column) for column in features_frame.columns)
    bounds = {
        "train": (0, cut_train),
        "validation": (cut_train, cut_validation),
        "test": (cut_validation, n),
    }
    source = f"bank-marketing({file})"
    return {
        split: Table(
            np.ascontiguousarray(features[a:b]),
            np.ascontiguousarray(labels[a:b]),
            f"{source}:{split}",
            names,
        )
        for split, (a, b) in bounds.items()
    }
