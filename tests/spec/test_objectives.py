"""Several objectives and constraints in a tuning spec: what loads, and every bad value
refused with one line that names it."""

from __future__ import annotations

from typing import Any

import pytest

from scaletune.errors import InvalidInputError
from scaletune.spec import ConstraintSpec, ObjectiveType, Strategy, tuning_spec_from_dict
from tests.spec.test_tuning_spec import _raw

AUC = {"metric": "validation:auc", "type": "Maximize"}
BILLABLE = {"metric": "billable_seconds", "type": "Minimize"}
WALL = {"metric": "wall_seconds", "type": "Minimize"}


def _objectives(*objectives: dict[str, str], **changes: Any) -> dict[str, Any]:
    raw = _raw(**changes)
    del raw["objective_metric"]
    raw["objectives"] = list(objectives)
    return raw


def test_the_first_objective_is_the_primary_one() -> None:
    spec = tuning_spec_from_dict(_objectives(AUC, BILLABLE, WALL))
    assert (spec.objective_metric, spec.objective_type) == (
        "validation:auc",
        ObjectiveType.MAXIMIZE,
    )
    assert [o.metric for o in spec.all_objectives] == [
        "validation:auc",
        "billable_seconds",
        "wall_seconds",
    ]
    assert spec.is_multi_objective


def test_one_objective_is_the_objective_metric() -> None:
    spec = tuning_spec_from_dict(_raw())
    assert not spec.is_multi_objective
    assert [(o.metric, o.type) for o in spec.all_objectives] == [
        ("validation:auc", ObjectiveType.MAXIMIZE)
    ]


def test_constraints_as_lines_or_tables() -> None:
    spec = tuning_spec_from_dict(
        _raw(
            constraints=[
                "validation:auc >= 0.78",
                {"metric": "billable_seconds", "max": 600},
                "wall_seconds<=60",
            ]
        )
    )
    assert spec.constraints == [
        ConstraintSpec(metric="validation:auc", min=0.78),
        ConstraintSpec(metric="billable_seconds", max=600),
        ConstraintSpec(metric="wall_seconds", max=60),
    ]


def test_nsga2_is_a_strategy_of_its_own() -> None:
    raw = _objectives(AUC, BILLABLE, strategy="NSGA-II")
    del raw["hyperband"]
    assert tuning_spec_from_dict(raw).strategy is Strategy.NSGA_II


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            _objectives(AUC, {"metric": "validation:nope", "type": "Minimize"}),
            "objectives: 'validation:nope' is neither reported by this job",
        ),
        (_objectives(AUC, BILLABLE, AUC), "objectives: 'validation:auc' is named twice"),
        (
            _objectives(BILLABLE, AUC),
            "objective_metric 'billable_seconds': the first objective must be a metric",
        ),
        (
            {**_objectives(AUC, BILLABLE), "objective_metric": "validation:error"},
            "must be the first of objectives, which is 'validation:auc'",
        ),
        (
            _raw(constraints=["validation:auc > 0.5"]),
            "'validation:auc > 0.5' is not a constraint",
        ),
        (_raw(constraints=["validation:auc >= high"]), "'high' is not a number"),
        (_raw(constraints=[{"metric": "validation:auc"}]), "needs min or max"),
        (
            _raw(constraints=[{"metric": "validation:auc", "min": 0.9, "max": 0.8}]),
            "min=0.9 is above max=0.8",
        ),
        (
            _raw(constraints=["validation:logloss <= 0.3"]),
            "constraints: 'validation:logloss' is neither reported",
        ),
        (
            _objectives(
                AUC,
                BILLABLE,
                hyperband={"min_resource": 1, "max_resource": 27, "searcher": "BOHB"},
            ),
            "hyperband.searcher 'BOHB' fits its model on one objective",
        ),
        (
            _objectives(
                AUC,
                BILLABLE,
                hyperband={"min_resource": 1, "max_resource": 27, "searcher": "LastValueTPE"},
            ),
            "hyperband.searcher 'LastValueTPE' fits its model on one objective",
        ),
        (
            _objectives(
                AUC,
                BILLABLE,
                hyperband={"min_resource": 1, "max_resource": 27, "searcher": "LastValueCQR"},
            ),
            "hyperband.searcher 'LastValueCQR' fits its model on one objective",
        ),
        (
            _objectives(
                AUC,
                BILLABLE,
                hyperband={
                    "min_resource": 1,
                    "max_resource": 27,
                    "searcher": "LastValueTPEThenCQR",
                },
            ),
            "hyperband.searcher 'LastValueTPEThenCQR' fits its model on one objective",
        ),
    ],
)
def test_bad_objectives_and_constraints_are_refused(raw: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        tuning_spec_from_dict(raw)
    assert expected in str(refused.value)
    assert "\n" not in str(refused.value)
