"""A tuning job's goals applied to trials: constraints hold or are violated by how much, and
the goals read back from a stored spec are the ones its validated models gave."""

from __future__ import annotations

import math

import pytest

from scaletune.analysis._objectives import Constraint, Goals, Objective, TrialCosts
from scaletune.spec import ObjectiveType, tuning_spec_from_dict
from scaletune.store import StoredTuningSpec
from tests.spec.test_objectives import AUC, BILLABLE, WALL, _objectives


def test_a_constraint_holds_within_its_bounds_and_says_how_far_outside() -> None:
    auc = Constraint("validation:auc", min=0.78)
    assert auc.holds(0.78) and not auc.holds(0.7799) and not auc.holds(None)
    assert auc.violation(0.7) == pytest.approx(0.08) and auc.violation(0.9) == 0
    assert auc.violation(None) == math.inf
    assert auc.describe() == "validation:auc >= 0.78"
    band = Constraint("wall_seconds", min=10, max=60)
    assert band.violation(70) == pytest.approx(10) and band.violation(5) == pytest.approx(5)
    assert band.describe() == "wall_seconds >= 10 and wall_seconds <= 60"


@pytest.mark.parametrize(
    "raw",
    [
        _objectives(AUC, BILLABLE, WALL, constraints=["validation:auc >= 0.7"]),
        _objectives(AUC, constraints=[{"metric": "billable_seconds", "max": 600}]),
        _objectives(AUC, BILLABLE),
    ],
    ids=["three objectives and a line", "one objective and a table", "two objectives"],
)
def test_goals_read_from_a_stored_spec_are_the_validated_ones(raw: dict[str, object]) -> None:
    spec = tuning_spec_from_dict(raw)
    stored = spec.model_dump(mode="json")
    assert Goals.of_stored(StoredTuningSpec.of(stored)) == Goals.of_spec(
        spec.all_objectives, spec.constraints
    )


def test_a_spec_with_only_an_objective_metric_has_that_one_goal() -> None:
    stored = {"objective_metric": "validation:loss", "objective_type": "Minimize"}
    goals = Goals.of_stored(StoredTuningSpec.of(stored))
    assert goals.objectives == (Objective("validation:loss", ObjectiveType.MINIMIZE),)
    assert not goals.is_multi_objective and goals.constraints == ()


def test_values_feasibility_and_what_a_searcher_learns() -> None:
    goals = Goals(
        (Objective("validation:auc", ObjectiveType.MAXIMIZE),
         Objective("billable_seconds", ObjectiveType.MINIMIZE)),
        (Constraint("validation:auc", min=0.8),),
    )  # fmt: skip
    good = TrialCosts({"validation:auc": 0.85}, billable_seconds=120.0, wall_seconds=60.0)
    poor = TrialCosts({"validation:auc": 0.75}, billable_seconds=30.0, wall_seconds=15.0)
    unreported = TrialCosts({}, billable_seconds=5.0, wall_seconds=5.0)
    assert goals.values(good) == (0.85, 120.0) and goals.values(unreported) is None
    assert goals.feasible(good) and not goals.feasible(poor) and not goals.feasible(unreported)
    others, violations = goals.outcome(poor)
    assert others == (30.0,) and violations == pytest.approx((0.05,))
    assert goals.outcome(unreported) == ((), (1e12,))  # ranks below every measured violation
