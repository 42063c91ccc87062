from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scaletune.errors import InvalidInputError
from scaletune.spec import (
    ContinuousRange,
    IntegerRange,
    ObjectiveType,
    Strategy,
    load_tuning_spec,
    tuning_spec_from_dict,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_PBT = {"perturbation_interval": 3}


def _raw(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "objective_metric": "validation:auc",
        "strategy": "Hyperband",
        "hyperband": {"min_resource": 1, "max_resource": 27},
        "max_jobs": 6,
        "max_parallel_jobs": 2,
        "ranges": {"eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1}},
        "training": {
            "algorithm": "xgboost",
            "instance_count": 2,
            "hyperparameters": {"num_round": 27, "eval_metric": "auc"},
            "channels": {
                "train": {"dataset": "breast-cancer"},
                "validation": {"dataset": "breast-cancer"},
            },
        },
    }
    raw.update(changes)
    return raw


def test_the_reference_tuning_job_loads(bank_marketing_file: Path) -> None:
    spec = load_tuning_spec(EXAMPLES / "tuning-bank-marketing.toml")
    assert spec.strategy is Strategy.HYPERBAND
    assert spec.objective_type is ObjectiveType.MAXIMIZE
    assert (spec.max_jobs, spec.max_parallel_jobs) == (30, 4)
    assert len(spec.ranges) == 7
    assert spec.ranges["num_round"] == IntegerRange(min_value=100, max_value=200)
    assert isinstance(spec.ranges["eta"], ContinuousRange)
    assert spec.training.instance_count == 3
    overridden = load_tuning_spec(
        EXAMPLES / "tuning-bank-marketing.toml", ["max_jobs=6", "max_parallel_jobs=2"]
    )
    assert (overridden.max_jobs, overridden.max_parallel_jobs) == (6, 2)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"ranges": {"etaa": {"type": "Continuous", "min_value": 0, "max_value": 1}}},
            "ranges.etaa: xgboost has no hyperparameter 'etaa'",
        ),
        (
            {"ranges": {"eta": {"type": "Continuous", "min_value": 0.5, "max_value": 2}}},
            "ranges.eta: 2.0 is not allowed: hyperparameters.eta: Input should be less than",
        ),
        (
            {"ranges": {"tree_method": {"type": "Categorical", "values": ["hist", "magic"]}}},
            "ranges.tree_method: 'magic' is not allowed",
        ),
        (
            {"objective_metric": "validation:accuracy"},
            "objective_metric 'validation:accuracy' is never reported by this job; it reports "
            "['train:auc', 'validation:auc']",
        ),
        ({"max_parallel_jobs": 7}, "max_parallel_jobs=7 is more than max_jobs=6"),
        ({"early_stopping": "Auto"}, "early_stopping='Auto' with strategy 'Hyperband'"),
        ({"hyperband": None}, "strategy 'Hyperband' needs [hyperband]"),
        ({"strategy": "Random"}, "[hyperband] is for strategy 'Hyperband', not 'Random'"),
        ({"strategy": "Grid", "hyperband": None}, "ranges.eta: Grid search needs"),
        ({"hyperband": {"min_resource": 5, "max_resource": 5}}, "min_resource must be below"),
        (
            {"hyperband": {"max_resource": 27, "brackets": 5}},
            "brackets=5: min_resource=1, max_resource=27 and eta=3 make 4",
        ),
        ({"hyperband": {"max_resource": 27, "brackets": 0}}, "hyperband.brackets: Input should"),
        ({"hyperband": {"max_resource": 27, "type": "pausing"}}, "'stopping' or 'promotion'"),
        (
            {"hyperband": {"max_resource": 27, "placement": "rungs"}},
            "placement='rungs' moves a trial to on-demand capacity when it is promoted",
        ),
        ({"hyperband": {"max_resource": 27, "placement": "nodes"}}, "'same' or 'rungs'"),
        (
            {
                "hyperband": {"max_resource": 27, "type": "promotion"},
                "training": {**_raw()["training"], "checkpoint": {"enabled": False}},
            },
            "hyperband.type 'promotion' resumes paused trials from their checkpoints",
        ),
        ({"strategy": "PBT", "hyperband": None}, "strategy 'PBT' needs [pbt]"),
        (
            {"strategy": "Random", "hyperband": None, "pbt": {"perturbation_interval": 3}},
            "[pbt] is for strategy 'PBT', not 'Random'",
        ),
        (
            {"strategy": "PBT", "hyperband": None, "pbt": {"perturbation_interval": 0}},
            "pbt.perturbation_interval: Input should be greater than or equal to 1",
        ),
        (
            {"strategy": "PBT", "hyperband": None, "max_parallel_jobs": 1, "pbt": _PBT},
            "strategy 'PBT' needs a population of 2 or more trials training at once "
            "(max_parallel_jobs=1)",
        ),
        (
            {"strategy": "PBT", "hyperband": None, "pbt": {**_PBT, "population": 3}},
            "pbt.population=3 is more than max_parallel_jobs=2",
        ),
        (
            {"strategy": "PBT", "hyperband": None, "pbt": {**_PBT, "quantile_fraction": 0.6}},
            "pbt.quantile_fraction: Input should be less than or equal to 0.5",
        ),
        (
            {"strategy": "PBT", "hyperband": None, "pbt": {**_PBT, "perturbation_factors": [1, 0]}},
            "perturbation_factors must be above 0 (got [1.0, 0.0])",
        ),
        (
            {
                "strategy": "PBT",
                "hyperband": None,
                "pbt": _PBT,
                "training": {**_raw()["training"], "checkpoint": {"enabled": False}},
            },
            "strategy 'PBT' copies the better trials' checkpoints",
        ),
        (
            {"strategy": "PBT", "hyperband": None, "pbt": _PBT, "early_stopping": "Auto"},
            "early_stopping='Auto' with strategy 'PBT'",
        ),
        (
            {
                "strategy": "PBT",
                "hyperband": None,
                "pbt": _PBT,
                "objectives": [
                    {"metric": "validation:auc", "type": "Maximize"},
                    {"metric": "billable_seconds", "type": "Minimize"},
                ],
            },
            "strategy 'PBT' ranks the population on one objective",
        ),
        (
            {
                "training": {
                    **_raw()["training"],
                    "checkpoint": {"enabled": False, "start_from": {"job": "j"}},
                }
            },
            "start_from copies the other job's checkpoint into this job's own",
        ),
        ({"max_jobs": 0}, "max_jobs: Input should be greater than or equal to 1"),
        ({"ranges": {}}, "ranges: Dictionary should have at least 1 item"),
    ],
)
def test_bad_tuning_jobs_are_refused_before_anything_starts(
    changes: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        tuning_spec_from_dict(_raw(**changes))
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_default_objective_metric_follows_the_objective() -> None:
    raw = _raw(objective_metric="validation:logloss", objective_type="Minimize")
    raw["training"]["hyperparameters"] = {"num_round": 27}  # binary:logistic -> logloss
    assert tuning_spec_from_dict(raw).objective_metric == "validation:logloss"


def test_cluster_size_can_be_tuned() -> None:
    ranges = {
        "instance_count": {"type": "Integer", "min_value": 1, "max_value": 3},
        "eta": {"type": "Continuous", "min_value": 0.1, "max_value": 0.5},
    }
    spec = tuning_spec_from_dict(_raw(ranges=ranges))
    assert spec.max_instance_count == 3
    trial = spec.trial_spec({"instance_count": 3, "eta": 0.2})
    assert (trial.instance_count, trial.hyperparameters["eta"]) == (3, 0.2)
    assert "instance_count" not in trial.hyperparameters


@pytest.mark.parametrize(
    ("size_range", "hyperparameters", "expected"),
    [
        (
            {"type": "Continuous", "min_value": 1, "max_value": 3},
            {},
            "a cluster size needs an Integer or Categorical range",
        ),
        (
            {"type": "Integer", "min_value": 0, "max_value": 3},
            {},
            "ranges.instance_count: 0 is not allowed: instance_count: Input should be greater",
        ),
        ({"type": "Categorical", "values": [1, "two"]}, {}, "cluster sizes are whole numbers"),
        (
            {"type": "Integer", "min_value": 1, "max_value": 2},
            {"tree_method": "exact"},
            "ranges.instance_count: 2 is not allowed: hyperparameters.tree_method='exact'",
        ),
    ],
)
def test_bad_cluster_size_ranges(
    size_range: dict[str, Any], hyperparameters: dict[str, Any], expected: str
) -> None:
    raw = _raw(ranges={"instance_count": size_range})
    raw["training"]["hyperparameters"].update(hyperparameters)
    raw["training"]["instance_count"] = 1
    with pytest.raises(InvalidInputError) as caught:
        tuning_spec_from_dict(raw)
    assert expected in str(caught.value)


def test_a_pbt_population_is_max_parallel_jobs_unless_set() -> None:
    spec = tuning_spec_from_dict(_raw(strategy="PBT", hyperband=None, pbt=_PBT))
    assert spec.population_size == 2
    assert spec.pbt is not None and spec.pbt.quantile_fraction == 0.25
    assert spec.trial_spec({"eta": 0.1}).checkpoint.start_from is None


_SPREAD = {
    "eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1},  # Auto: linear (2 decades)
    "gamma": {"type": "Continuous", "min_value": 1e-4, "max_value": 1, "scaling": "Logarithmic"},
    "subsample": {
        "type": "Continuous",
        "min_value": 0.5,
        "max_value": 0.99,
        "scaling": "ReverseLogarithmic",
    },
    "max_depth": {"type": "Integer", "min_value": 1, "max_value": 10},
    "max_bin": {"type": "Integer", "min_value": 16, "max_value": 1024, "scaling": "Logarithmic"},
    "tree_method": {"type": "Categorical", "values": ["hist", "approx"]},
}


def test_first_configurations_are_filled_in_with_the_middle_of_each_range() -> None:
    assert tuning_spec_from_dict(_raw(ranges=_SPREAD)).first_points == []  # none by default
    spec = tuning_spec_from_dict(_raw(ranges=_SPREAD, first_configurations=[{}]))
    (middle,) = spec.first_points
    assert middle["eta"] == pytest.approx(0.505)
    assert middle["gamma"] == pytest.approx(0.01)  # the geometric mean of 1e-4 and 1
    assert middle["subsample"] == pytest.approx(1 - (0.5 * 0.01) ** 0.5)  # halfway in 1 - x, log
    assert middle["max_depth"] == 6  # 5.5, rounded half to even
    assert middle["max_bin"] == 128  # the geometric mean of 16 and 1024
    assert middle["tree_method"] == "hist"  # categories have no middle: the first
    given = tuning_spec_from_dict(
        _raw(ranges=_SPREAD, first_configurations=[{"eta": 0.1, "max_depth": 3}, {}])
    )
    assert given.first_points == [{**middle, "eta": 0.1, "max_depth": 3}, middle]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"first_configurations": [{"eta": 0.1}, {"depth": 3}]},
            "first_configurations[1].depth: no such range (ranges: eta, max_depth)",
        ),
        ({"first_configurations": [{"eta": 2}]}, "first_configurations[0].eta: 2 is outside"),
        (
            {"first_configurations": [{"max_depth": 2.5}]},
            "first_configurations[0].max_depth: 2.5 is not a whole number",
        ),
        (
            {"first_configurations": [{"eta": "fast"}]},
            "first_configurations[0].eta: 'fast' is not a number",
        ),
        (
            {"first_configurations": [{}] * 7},
            "first_configurations: 7 of them is more than max_jobs=6",
        ),
        (
            {"strategy": "Grid", "hyperband": None, "first_configurations": [{"max_depth": 2}]},
            "first_configurations: Grid walks every point",
        ),
    ],
)
def test_bad_first_configurations_are_refused(changes: dict[str, Any], expected: str) -> None:
    ranges = {"eta": _SPREAD["eta"], "max_depth": _SPREAD["max_depth"]}
    if changes.get("strategy") == "Grid":
        ranges = {"max_depth": _SPREAD["max_depth"]}
    with pytest.raises(InvalidInputError) as caught:
        tuning_spec_from_dict(_raw(ranges=ranges, **changes))
    assert expected in str(caught.value)


def test_a_category_must_be_one_of_its_values() -> None:
    ranges = {"max_depth": {"type": "Categorical", "values": [1, 2]}}
    with pytest.raises(InvalidInputError, match=r"\[0\].max_depth: True is not one of \[1, 2\]"):
        tuning_spec_from_dict(_raw(ranges=ranges, first_configurations=[{"max_depth": True}]))
    spec = tuning_spec_from_dict(_raw(ranges=ranges, first_configurations=[{"max_depth": 2.0}]))
    assert spec.first_points == [{"max_depth": 2}]  # the category itself
    assert type(spec.first_points[0]["max_depth"]) is int
