"""Controller-side work for XGBoost: label checks and the optional feature quantisation."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scaletune.algorithms._boosting import refuse_labels
from scaletune.data import Table
from scaletune.data._table import FloatArray
from scaletune.spec import ChannelName

from ._hyperparameters import Objective, XGBoostHyperparameters


def check_labels(
    hyperparameters: XGBoostHyperparameters, tables: Mapping[ChannelName, Table]
) -> None:
    objective = hyperparameters.objective
    for name, table in tables.items():
        labels = table.labels
        if objective.is_binary or objective is Objective.REG_LOGISTIC:
            bad = (
                ~np.isin(labels, (0.0, 1.0)) if objective.is_binary else (labels < 0) | (labels > 1)
            )
            wanted = "0 or 1" if objective.is_binary else "in [0, 1]"
        elif objective.is_multiclass:
            classes = hyperparameters.num_class or 0
            bad = (labels != np.round(labels)) | (labels < 0) | (labels >= classes)
            wanted = f"an integer in [0, {classes - 1}]"
        elif objective is Objective.COUNT_POISSON:
            bad, wanted = labels < 0, "non-negative"
        else:
            continue
        refuse_labels(name, table, bad, wanted, objective.value)


@dataclass(frozen=True)
class Quantizer:
    """Per-feature bin edges; a feature with no edges already has few enough distinct values."""

    edges: tuple[tuple[float, ...], ...]

    @classmethod
    def fit(cls, features: FloatArray, max_bin: int) -> Quantizer:
        edges: list[tuple[float, ...]] = []
        for column in features.T:
            distinct = np.unique(column)
            if len(distinct) <= max_bin:
                edges.append(())
                continue
            cuts = np.quantile(column, np.linspace(0, 1, max_bin + 1)[1:-1], method="lower")
            edges.append(tuple(float(value) for value in np.unique(cuts)))
        return cls(tuple(edges))

    def transform(self, features: FloatArray) -> FloatArray:
        out = np.array(features, dtype=np.float32, copy=True)
        for index, cuts in enumerate(self.edges):
            if cuts:
                out[:, index] = np.searchsorted(np.asarray(cuts), features[:, index], side="right")
        return out

    def to_json(self) -> bytes:
        return json.dumps({"format": "scaletune-quantizer-1", "edges": self.edges}).encode()

    @classmethod
    def from_json(cls, text: str | bytes) -> Quantizer:
        """The bins a model was trained on, as `to_json` saved them beside it."""
        edges = json.loads(text)["edges"]
        return cls(tuple(tuple(float(value) for value in column) for column in edges))


def quantize(
    tables: Mapping[ChannelName, Table], max_bin: int
) -> tuple[dict[ChannelName, Table], Quantizer]:
    """Fit on the whole training channel (not a shard), apply to every channel."""
    quantizer = Quantizer.fit(tables[ChannelName.TRAIN].features, max_bin)
    return {
        name: Table(
            quantizer.transform(table.features), table.labels, table.source, table.feature_names
        )
        for name, table in tables.items()
    }, quantizer
