from __future__ import annotations

import numpy as np
import pytest

from scaletune.algorithms.xgboost import Quantizer, XGBoostHyperparameters
from scaletune.algorithms.xgboost._prepare import check_labels
from scaletune.algorithms.xgboost._program import _parse_eval
from scaletune.data import Table
from scaletune.errors import InvalidInputError
from scaletune.spec import ChannelName


def _table(labels: list[float]) -> Table:
    return Table(np.zeros((len(labels), 1), np.float32), np.asarray(labels, np.float32), "t")


@pytest.mark.parametrize(
    ("objective", "labels", "expected"),
    [
        ("binary:logistic", [0, 1, 0.5], "row 3 has label 0.5, not 0 or 1"),
        ("reg:logistic", [0, 1.5], "not in [0, 1]"),
        ("count:poisson", [1, -1], "not non-negative"),
    ],
)
def test_labels_the_objective_cannot_take(
    objective: str, labels: list[float], expected: str
) -> None:
    hyperparameters = XGBoostHyperparameters.model_validate({"objective": objective})
    with pytest.raises(InvalidInputError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        check_labels(hyperparameters, {ChannelName.TRAIN: _table(labels)})


def test_multiclass_labels_need_num_class() -> None:
    hyperparameters = XGBoostHyperparameters.model_validate(
        {"objective": "multi:softprob", "num_class": 3}
    )
    check_labels(hyperparameters, {ChannelName.TRAIN: _table([0, 1, 2])})
    with pytest.raises(InvalidInputError, match="an integer in"):
        check_labels(hyperparameters, {ChannelName.TRAIN: _table([0, 3])})


def test_quantizer_bins_only_features_with_too_many_values() -> None:
    rng = np.random.default_rng(0)
    features = np.column_stack([rng.normal(size=1000), rng.integers(0, 5, 1000)]).astype(np.float32)
    quantizer = Quantizer.fit(features, max_bin=16)
    binned = quantizer.transform(features)
    assert len(np.unique(binned[:, 0])) <= 16
    assert np.array_equal(binned[:, 1], features[:, 1])  # 5 values: left alone
    assert quantizer.edges[1] == ()


def test_lambda_is_spelled_as_the_reference_spells_it() -> None:
    hyperparameters = XGBoostHyperparameters.model_validate({"lambda": 2.0})
    assert hyperparameters.booster_params(seed=1, nthread=2)["lambda"] == 2.0


def test_test_metrics_are_parsed() -> None:
    assert _parse_eval("[0]\ttest-auc:0.78\ttest-logloss:0.3") == {
        "test:auc": 0.78,
        "test:logloss": 0.3,
    }
