"""Replaying a stored tuning job's learning curves with the same seed makes the same decisions."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from scaletune.analysis import summarize
from scaletune.api import Session
from scaletune.errors import InvalidInputError
from scaletune.simulation import ClusterCosts, Curve, CurvePoint, ReplaySource, simulate_tuning
from scaletune.spec import TuningJobSpec, tuning_spec_from_dict
from scaletune.store import Store
from scaletune.tuning import TuningController


class ToySource:
    """Accuracy rises towards a ceiling that peaks at lr = 0.01; more workers, faster steps."""

    costs = ClusterCosts(start_seconds=1.5, scaling_efficiency=0.8)

    def curve(self, hyperparameters: Mapping[str, object], instance_count: int) -> Curve:
        lr = float(hyperparameters["lr"])  # type: ignore[arg-type]
        ceiling = 1.0 - abs(math.log10(lr) + 2.0) / 3.0
        steps = range(1, 28)
        arrivals = self.costs.arrival_seconds([0.7 * k for k in steps], instance_count)
        points = [
            CurvePoint(k, seconds, {"accuracy": ceiling * (1 - math.exp(-k / 6)), "epoch": k})
            for k, seconds in zip(steps, arrivals, strict=True)
        ]
        return Curve(points, full_resource=27)


def _spec(**changes: Any) -> TuningJobSpec:
    raw: dict[str, Any] = {
        "objective_metric": "accuracy",
        "strategy": "Hyperband",
        "hyperband": {"min_resource": 1, "max_resource": 27, "searcher": "Bayesian"},
        "max_jobs": 16,
        "max_parallel_jobs": 3,
        "seed": 11,
        "ranges": {
            "lr": {"type": "Continuous", "min_value": 1e-4, "max_value": 1.0},
            "instance_count": {"type": "Categorical", "values": [1, 2, 3]},
        },
        "training": {"algorithm": "script", "script": {"entry_point": "simulated-trial"}},
    }
    raw.update(changes)
    return tuning_spec_from_dict(raw)


def _decisions(store: Store, tuning_id: str) -> list[tuple[object, ...]]:
    return [
        (t.trial_number, t.hyperparameters, t.instance_count, t.status, t.failure_reason)
        for t in store.trials.rows(tuning_id)
    ]


@pytest.mark.parametrize(
    ("hyperband", "seed"),
    [
        ({"min_resource": 1, "max_resource": 27, "searcher": "Bayesian", "rank_by": "value"}, 11),
        # Paused trials resume where they were: their replayed curves leave the pauses out.
        (
            {
                "min_resource": 1,
                "max_resource": 27,
                "eta": 2,
                "searcher": "BOHB",
                "type": "promotion",
                "rank_by": "value",
            },
            11,
        ),
        (
            {"min_resource": 1, "max_resource": 27, "searcher": "LastValueTPE", "rank_by": "value"},
            11,
        ),
        # scaletune's defaults (rungs ranking forecasts), stopping and pausing; with seed 0
        # three paused trials are promoted
        ({"min_resource": 1, "max_resource": 27}, 11),
        ({"min_resource": 1, "max_resource": 27, "eta": 2, "type": "promotion"}, 0),
    ],
    ids=[
        "stopping",
        "promotion-bohb",
        "stopping-last-value",
        "stopping-forecast",
        "promotion-forecast",
    ],
)
def test_a_replay_of_a_simulated_job_reproduces_every_decision_and_moment(
    store: Store, hyperband: dict[str, Any], seed: int
) -> None:
    original = simulate_tuning(_spec(hyperband=hyperband, seed=seed), ToySource(), store)
    replay = ReplaySource.from_store(store, original.id)
    again = simulate_tuning(replay.spec, replay, store)
    assert again.id != original.id
    assert _decisions(store, again.id) == _decisions(store, original.id)
    first, second = summarize(store, original.id), summarize(store, again.id)
    assert any(t.status.value == "Stopped" for t in store.trials.rows(first.record.id))
    runs = [len(store.attempts.of(t.id)) for t in store.trials.rows(first.record.id)]
    if hyperband.get("type") == "promotion":  # a paused trial resumes: a second attempt
        assert 2 in runs
    if hyperband.get("searcher") == "BOHB":  # seed 11, eta 2: two promoted, or more
        assert runs.count(2) >= 2

    def moments(tuning_id: str) -> list[tuple[object, ...]]:  # to the nanosecond: a paused
        # trial's replayed times are sums of differences
        return [
            (round(t.start_time or 0, 9), round(t.end_time or 0, 9), t.resource, t.objective)
            for t in store.trials.rows(tuning_id)
        ]

    assert moments(second.record.id) == moments(first.record.id)
    assert second.billable_seconds == first.billable_seconds
    assert again.wall_seconds == original.wall_seconds


def test_a_replay_of_a_real_tuning_job_reproduces_its_decisions(
    session: Session, store: Store
) -> None:
    channel = {"dataset": "breast-cancer"}
    spec = tuning_spec_from_dict(
        {
            "objective_metric": "validation:logloss",
            "objective_type": "Minimize",
            "strategy": "Hyperband",
            # The workers wait at each rung for its verdict (WorkerTask.judged_steps), so a
            # stop lands at its rung however busy the machine, as in the replay. Before they
            # did, a trial sometimes ran to its end first even with 234 rounds to go (0.08 s):
            # Completed where its replay says Stopped (the landing CI of fa3d34d).
            "hyperband": {"min_resource": 1, "max_resource": 243, "rank_by": "value"},
            "max_jobs": 6,
            "max_parallel_jobs": 1,  # a real job's report order is then its trial order
            "seed": 1,
            "ranges": {"eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1}},
            "training": {
                "algorithm": "xgboost",
                "hyperparameters": {"num_round": 243, "eval_metric": "logloss"},
                "channels": {"train": channel, "validation": channel},
            },
        }
    )
    tuner = TuningController(session.controller)
    original = tuner.run(tuner.create(spec), spec)
    replay = ReplaySource.from_store(session.store, original.id)
    again = simulate_tuning(replay.spec, replay, session.store)
    assert _decisions(session.store, again.id) == _decisions(session.store, original.id)
    assert any(t.status.value == "Stopped" for t in session.store.trials.rows(again.id))


def test_a_configuration_never_run_gets_the_nearest_recorded_curve(store: Store) -> None:
    original = simulate_tuning(
        _spec(max_jobs=6, strategy="Random", hyperband=None), ToySource(), store
    )
    replay = ReplaySource.from_store(store, original.id)
    trials = store.trials.rows(original.id)
    target = trials[2]
    lr = float(target.hyperparameters["lr"])
    nearby = replay.curve({"lr": lr * 1.0001}, target.instance_count)
    assert nearby.points[-1].metrics["accuracy"] == target.objective


def test_a_tuning_job_with_nothing_to_replay_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInputError, match="no trial with a report to replay"):
        ReplaySource(_spec(), [])
    with pytest.raises(InvalidInputError, match="nope"):
        ReplaySource.from_store(store, "nope")


def test_first_configurations_come_first_and_a_grid_replay_drops_them(store: Store) -> None:
    from scaletune.simulation import replay_tuning

    ranges = {
        "lr": {"type": "Categorical", "values": [0.001, 0.01, 0.1]},
        "instance_count": {"type": "Categorical", "values": [1, 2, 3]},
    }
    first = [{"lr": 0.1}, {"lr": 0.01, "instance_count": 2}]
    original = simulate_tuning(
        _spec(ranges=ranges, first_configurations=first, max_jobs=9), ToySource(), store
    )

    def tried(tuning_id: str) -> list[tuple[object, int]]:
        return [(t.hyperparameters["lr"], t.instance_count) for t in store.trials.rows(tuning_id)]

    assert tried(original.id)[:2] == [(0.1, 1), (0.01, 2)]  # unnamed: the first category
    again = replay_tuning(store, original.id, start_time=0.0)  # as it was
    assert tried(again.id)[:2] == [(0.1, 1), (0.01, 2)]
    grid = replay_tuning(
        store, original.id, ["strategy=Grid", "max_parallel_jobs=1"], start_time=0.0
    )
    assert tried(grid.id)[:2] == [(0.001, 1), (0.001, 2)]  # the grid's own order from the start
