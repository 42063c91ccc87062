"""Datasets that ship inside a dependency, so the embedded default runs offline."""

from __future__ import annotations

import numpy as np

from scaletune.data._table import Table

SPLIT_SEED = 1729
SPLIT_FRACTIONS = (0.7, 0.15, 0.15)  # train, validation, test


def prepare_breast_cancer() -> dict[str, Table]:
    """scikit-learn's Wisconsin breast cancer set (569 rows, 30 features), label 1 = benign."""
    from sklearn.datasets import load_breast_cancer  # a heavy import, for this dataset only

    bunch = load_breast_cancer()
    features = np.asarray(bunch.data, dtype=np.float32)
    labels = np.asarray(bunch.target, dtype=np.float32)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    n = len(order)
    cut_train = int(SPLIT_FRACTIONS[0] * n)
    cut_validation = int((SPLIT_FRACTIONS[0] + SPLIT_FRACTIONS[1]) * n)
    names = tuple(str(name) for name in bunch.feature_names)
    parts = {
        "train": order[:cut_train],
        "validation": order[cut_train:cut_validation],
        "test": order[cut_validation:],
    }
    return {
        split: Table(features[rows], labels[rows], f"breast-cancer:{split}", names)
        for split, rows in parts.items()
    }
