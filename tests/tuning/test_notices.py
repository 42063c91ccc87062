"""Lines a tuning job's settings earn before it runs."""

from __future__ import annotations

from typing import Any

import pytest

from scaletune.spec import tuning_spec_from_dict
from scaletune.tuning import notices


def _spec(**changes: Any) -> Any:
    channel = {"dataset": "breast-cancer"}
    raw: dict[str, Any] = {
        "objective_metric": "validation:auc",
        "strategy": "Hyperband",
        "max_jobs": 4,
        "hyperband": {"min_resource": 1, "max_resource": 27, "rank_by": "value"},
        "ranges": {
            "eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1},
            "max_depth": {"type": "Integer", "min_value": 1, "max_value": 8},
        },
        "training": {
            "algorithm": "xgboost",
            "hyperparameters": {"num_round": 27, "eval_metric": "auc"},
            "channels": {"train": channel, "validation": channel},
        },
    }
    raw.update(changes)
    return tuning_spec_from_dict(raw)


def test_a_first_rung_at_round_one_that_cannot_rank_eta_is_named() -> None:
    (line,) = notices(_spec())
    assert line.startswith("note: Hyperband's first rung is round 1, where validation:auc is")
    assert "hyperband.min_resource = 2 or more" in line
    assert 'hyperband.rank_by = "forecast"' in line


def test_a_job_too_short_to_forecast_after_round_one_ranks_values_there_and_is_named() -> None:
    # Rungs at 1 and 3 below 9: none has the 4 reports a forecast needs, so round 1 ranks
    # values, forecast asked for or not.
    (line,) = notices(_spec(hyperband={"min_resource": 1, "max_resource": 9}))
    assert line.startswith("note: Hyperband's first rung is round 1, where validation:auc is")
    assert "no rung after round 1 below max_resource = 9 has the 4 reports a forecast" in line


@pytest.mark.parametrize(
    "changes",
    [
        {"hyperband": {"min_resource": 2, "max_resource": 27}},  # eta counts from round 2
        {  # a forecast needs 4 reports: round 1 judges nothing, rung 9 forecasts
            "hyperband": {"min_resource": 1, "max_resource": 27, "rank_by": "forecast"}
        },
        {  # logloss reads the scores themselves, which eta scales
            "objective_metric": "validation:logloss",
            "objective_type": "Minimize",
            "training": {
                "algorithm": "xgboost",
                "hyperparameters": {"num_round": 27, "eval_metric": "logloss"},
                "channels": {
                    "train": {"dataset": "breast-cancer"},
                    "validation": {"dataset": "breast-cancer"},
                },
            },
        },
        {"ranges": {"max_depth": {"type": "Integer", "min_value": 1, "max_value": 8}}},
        {"strategy": "Random", "hyperband": None},  # no rungs
    ],
)
def test_settings_where_round_one_can_rank_every_tuned_range_earn_no_note(
    changes: dict[str, Any],
) -> None:
    assert notices(_spec(**changes)) == []


def test_the_note_holds_xgboosts_auc_at_round_one_is_the_same_for_every_eta() -> None:
    import xgboost as xgb
    from sklearn.datasets import load_breast_cancer

    features, labels = load_breast_cancer(return_X_y=True)
    train = xgb.DMatrix(features[:400], label=labels[:400])
    validation = xgb.DMatrix(features[400:], label=labels[400:])
    curves = []
    for eta in (0.01, 0.3, 0.9):
        seen: dict[str, Any] = {}
        params = {"objective": "binary:logistic", "eval_metric": "auc", "eta": eta}
        xgb.train(params, train, 3, evals=[(validation, "v")], evals_result=seen)
        curves.append(seen["v"]["auc"])
    assert len({curve[0] for curve in curves}) == 1  # round 1: one AUC for every eta
    assert len({curve[2] for curve in curves}) == 3  # by round 3 eta tells them apart
