from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from scaletune.errors import InvalidInputError
from scaletune.spec import (
    CategoricalRange,
    ContinuousRange,
    IntegerRange,
    ObjectiveType,
    ParameterRange,
    Range,
    Scaling,
)
from scaletune.tuning import GridSearcher, TrialResult, bayesian_searcher, random_searcher

# The reference's seven ranges for XGBoost.
REFERENCE_RANGES: dict[str, Range] = {
    "num_round": IntegerRange(min_value=100, max_value=200),
    "eta": ContinuousRange(min_value=0, max_value=1),
    "min_child_weight": ContinuousRange(min_value=1, max_value=10),
    "alpha": ContinuousRange(min_value=0, max_value=2),
    "max_depth": IntegerRange(min_value=1, max_value=10),
    "colsample_bylevel": ContinuousRange(min_value=0, max_value=1),
    "colsample_bytree": ContinuousRange(min_value=0, max_value=1),
}


def _inside(config: dict[str, object]) -> bool:
    for name, value in config.items():
        bounds = REFERENCE_RANGES[name]
        assert not isinstance(bounds, CategoricalRange)
        assert isinstance(value, int | float)
        if not bounds.min_value <= value <= bounds.max_value:
            return False
    return True


@pytest.mark.parametrize("make", [random_searcher, bayesian_searcher])
def test_seeded_searchers_repeat_themselves(make) -> None:
    def proposals(seed: int) -> list[dict[str, object]]:
        searcher = make(REFERENCE_RANGES, ObjectiveType.MAXIMIZE, seed)
        out = []
        for _ in range(14):  # past TPE's 10 random start-up proposals
            suggestion = searcher.suggest()
            assert suggestion is not None
            out.append(suggestion.config)
            searcher.observe(TrialResult(suggestion.number, float(suggestion.config["eta"])))
        return out

    first = proposals(seed=1)
    assert first == proposals(seed=1)
    assert first != proposals(seed=2)
    assert all(_inside(config) for config in first)
    assert all(isinstance(config["num_round"], int) for config in first)


def test_searchers_take_failures_and_early_stops() -> None:
    searcher = bayesian_searcher(REFERENCE_RANGES, ObjectiveType.MINIMIZE, seed=0, n_startup=2)
    outcomes = [None, 0.5, 0.4, 0.3]
    for index, value in enumerate(outcomes):
        suggestion = searcher.suggest()
        stopped = index == 2
        searcher.observe(TrialResult(suggestion.number, value, resource=3, stopped_early=stopped))
    assert _inside(searcher.suggest().config)


def test_log_scales_stay_in_range() -> None:
    ranges: dict[str, Range] = {
        "lr": ContinuousRange(min_value=1e-5, max_value=1.0),  # Auto -> log: 5 decades
        "momentum": ContinuousRange(
            min_value=0.9, max_value=0.999, scaling=Scaling.REVERSE_LOGARITHMIC
        ),
        "batch": IntegerRange(min_value=16, max_value=1024, scaling=Scaling.LOGARITHMIC),
    }
    assert isinstance(ranges["lr"], ContinuousRange)
    assert ranges["lr"].effective_scaling is Scaling.LOGARITHMIC
    searcher = random_searcher(ranges, ObjectiveType.MAXIMIZE, seed=3)
    configs = [searcher.suggest().config for _ in range(200)]
    momenta = [float(c["momentum"]) for c in configs]  # type: ignore[arg-type]
    assert all(0.9 <= m <= 0.999 for m in momenta)
    assert sum(m > 0.99 for m in momenta) > 50  # dense near 1: half the log range is above .99
    assert all(1e-5 <= float(c["lr"]) <= 1 for c in configs)  # type: ignore[arg-type]
    assert sum(float(c["lr"]) < 1e-3 for c in configs) > 60  # type: ignore[arg-type]


def test_grid_walks_every_combination_once() -> None:
    grid = GridSearcher(
        {
            "depth": IntegerRange(min_value=1, max_value=3),
            "booster": CategoricalRange(values=["gbtree", "dart"]),
        }
    )
    configs = []
    while (suggestion := grid.suggest()) is not None:
        configs.append(suggestion.config)
    assert len(configs) == 6
    assert configs[0] == {"depth": 1, "booster": "gbtree"}
    assert len({tuple(c.values()) for c in configs}) == 6


def test_grid_refuses_continuous_ranges() -> None:
    with pytest.raises(InvalidInputError, match=r"ranges\.eta: Grid search needs"):
        GridSearcher({"eta": ContinuousRange(min_value=0, max_value=1)})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"type": "Continuous", "min_value": 1, "max_value": 1}, "must be below max_value"),
        ({"type": "Integer", "min_value": 5, "max_value": 2}, "must be below max_value"),
        (
            {"type": "Continuous", "min_value": 0, "max_value": 1, "scaling": "Logarithmic"},
            "needs min_value > 0",
        ),
        (
            {
                "type": "Continuous",
                "min_value": 0.5,
                "max_value": 1,
                "scaling": "ReverseLogarithmic",
            },
            "max_value < 1",
        ),
        (
            {"type": "Integer", "min_value": 1, "max_value": 5, "scaling": "ReverseLogarithmic"},
            "ReverseLogarithmic is for continuous",
        ),
        ({"type": "Categorical", "values": []}, "at least 1 item"),
        ({"type": "Categorical", "values": ["a", "a"]}, "values repeat"),
        ({"type": "Uniform", "min_value": 0, "max_value": 1}, "does not match any of the expected"),
        ({"type": "Continuous", "min_value": 0, "max_value": 1, "step": 2}, "Extra inputs"),
    ],
)
def test_bad_ranges(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TypeAdapter(ParameterRange).validate_python(raw)


def test_priors_inform_without_taking_trial_numbers() -> None:
    ranges: dict[str, Range] = {"eta": ContinuousRange(min_value=0.1, max_value=0.5)}
    searcher = bayesian_searcher(ranges, ObjectiveType.MAXIMIZE, seed=0, n_startup=1)
    assert searcher.add_prior({"eta": 0.2}, 0.7)
    assert not searcher.add_prior({"eta": 0.9}, 0.9)  # outside this job's range
    assert not searcher.add_prior({"depth": 3}, 0.9)  # another job's hyperparameters
    # This job's own trial 0, after a restart.
    searcher.restore(0, {"eta": 0.3}, TrialResult(0, 0.6))
    suggestion = searcher.suggest()
    assert suggestion is not None
    assert suggestion.number == 1
    assert not GridSearcher({"d": IntegerRange(min_value=1, max_value=2)}).add_prior({"d": 1}, 0.5)


def test_several_objectives_are_told_to_optuna_with_their_constraints() -> None:
    ranges = {"x": ContinuousRange(min_value=0, max_value=1)}
    searcher = bayesian_searcher(
        ranges,
        ObjectiveType.MAXIMIZE,
        seed=0,
        objectives=[ObjectiveType.MAXIMIZE, ObjectiveType.MINIMIZE],
    )
    first, second, third, fourth = (searcher.suggest() for _ in range(4))
    searcher.observe(TrialResult(first.number, 0.9, others=(12.0,), violations=(0.0,)))
    searcher.observe(TrialResult(second.number, 0.7, others=(3.0,), violations=(2.5,)))
    searcher.observe(TrialResult(third.number, 0.5, stopped_early=True, resource=1, others=(1.0,)))
    searcher.observe(TrialResult(fourth.number, 0.6))  # completed, but its cost never recorded
    study = searcher._study
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL"]
    assert [t.values for t in study.trials[:2]] == [[0.9, 12.0], [0.7, 3.0]]
    assert [t.constraints for t in study.trials[:2]] == [{"c0": 0.0}, {"c0": 2.5}]
    assert not searcher.add_prior({"x": 0.5}, 0.8)  # one value is not a point of two


def test_a_restored_multi_objective_trial_keeps_its_values() -> None:
    from scaletune.tuning._searchers import nsga2_searcher

    ranges = {"x": ContinuousRange(min_value=0, max_value=1)}
    directions = [ObjectiveType.MAXIMIZE, ObjectiveType.MINIMIZE]
    searcher = nsga2_searcher(
        ranges, ObjectiveType.MAXIMIZE, seed=0, objectives=directions, population_size=4
    )
    for number in range(6):
        searcher.restore(
            number, {"x": number / 10}, TrialResult(number, 0.1 * number, others=(float(number),))
        )
    study = searcher._study
    assert [t.values for t in study.trials] == [[0.1 * n, float(n)] for n in range(6)]
    assert searcher.suggest().number == 6  # NSGA-II breeds from the restored generation


@pytest.mark.parametrize("make", [random_searcher, bayesian_searcher])
def test_the_first_configurations_come_first_then_the_searchers_own(make) -> None:
    middle: dict[str, object] = {name: r.middle() for name, r in REFERENCE_RANGES.items()}
    chosen = {**middle, "eta": 0.05, "max_depth": 3}
    searcher = make(REFERENCE_RANGES, ObjectiveType.MAXIMIZE, 0, first=[middle, chosen])
    proposals = [searcher.suggest() for _ in range(3)]
    assert [p.config for p in proposals[:2]] == [middle, chosen]
    assert [p.number for p in proposals] == [0, 1, 2]
    assert proposals[2].config not in (middle, chosen) and _inside(proposals[2].config)
    for proposal in proposals:
        searcher.observe(TrialResult(proposal.number, float(proposal.config["eta"])))
    assert [t.params["eta"] for t in searcher._study.trials[:2]] == [0.5, 0.05]  # told as tried

    # After a restart, only those not tried yet come first.
    restored = make(REFERENCE_RANGES, ObjectiveType.MAXIMIZE, 0, first=[middle, chosen])
    restored.restore(0, middle, TrialResult(0, 0.5))
    assert restored.suggest().config == chosen
    again = make(REFERENCE_RANGES, ObjectiveType.MAXIMIZE, 0, first=[middle, chosen])
    for number in range(2):
        again.restore(number, proposals[number].config, TrialResult(number, 0.5))
    assert again.suggest().config not in (middle, chosen)


def test_a_pbt_population_and_bohb_start_from_the_first_configurations() -> None:
    from scaletune.spec import PBTSpec
    from scaletune.tuning._multifidelity import RungModelSearcher
    from scaletune.tuning._pbt import PopulationBasedTraining

    middle: dict[str, object] = {name: r.middle() for name, r in REFERENCE_RANGES.items()}
    bohb = RungModelSearcher(REFERENCE_RANGES, ObjectiveType.MAXIMIZE, 0, [1, 3, 9], first=[middle])
    assert bohb.suggest().config == middle
    assert bohb.suggest().config != middle
    population = PopulationBasedTraining(
        REFERENCE_RANGES,
        ObjectiveType.MAXIMIZE,
        0,
        PBTSpec(perturbation_interval=2),
        population=2,
        max_jobs=4,
        first=[middle],
    )
    members = [population.searcher.suggest() for _ in range(2)]
    assert members[0] is not None and members[0].config == middle
    assert members[1] is not None and members[1].config != middle
