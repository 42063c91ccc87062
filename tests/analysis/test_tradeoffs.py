"""Several objectives, constraints and a target through the whole tuning loop (simulated
trials, the real tuner and store): the Pareto front against a worked example, constraints
that keep infeasible trials from being best, the cheapest and fastest trial to reach a
target, multi-objective Hyperband, and a replay."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaletune.analysis import analytics_dataframe, summarize
from scaletune.simulation import replay_tuning, simulate_tuning
from scaletune.spec import tuning_spec_from_dict
from scaletune.store import JobStatus, Store
from tests.simulated import MAX_RESOURCE, RisingCurves

# RisingCurves: accuracy x (1 - e^-step); a trial on n workers takes 1 + 9/n seconds, so it
# bills n + 9 worker-seconds: 10, 11 or 12 for 1, 2 or 3 workers, in 10, 5.5 or 4 seconds.
FINAL = 1 - math.exp(-MAX_RESOURCE)
ACCURACY = {"metric": "accuracy", "type": "Maximize"}
BILLABLE = {"metric": "billable_seconds", "type": "Minimize"}
WALL = {"metric": "wall_seconds", "type": "Minimize"}


def _grid(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "trade-offs",
        "objectives": [ACCURACY, BILLABLE, WALL],
        "strategy": "Grid",
        "max_jobs": 9,
        "max_parallel_jobs": 3,
        "ranges": {
            "x": {"type": "Categorical", "values": [0.2, 0.5, 0.8]},
            "instance_count": {"type": "Categorical", "values": [1, 2, 3]},
        },
        "training": {
            "algorithm": "script",
            "instance_count": 1,
            "script": {"entry_point": "simulated-trial"},
        },
    }
    raw.update(changes)
    return raw


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.db'}") as opened:
        yield opened


def _run(store: Store, raw: dict[str, Any]) -> str:
    spec = tuning_spec_from_dict(raw)
    return simulate_tuning(spec, RisingCurves(), store, start_time=1_000.0).id


def test_the_front_of_three_objectives_is_the_best_settings_on_each_cluster_size(
    store: Store,
) -> None:
    # x = 0.8 beats 0.2 and 0.5 on the same workers; between sizes, more workers cost more
    # and end sooner: neither dominates, so the front is x = 0.8 on 1, 2 and 3 workers.
    tuning_id = _run(store, _grid())
    summary = summarize(store, tuning_id)
    front = summary.pareto_front
    assert front is not None
    assert [(p.hyperparameters["x"], p.instance_count) for p in front] == [
        (0.8, 1),
        (0.8, 2),
        (0.8, 3),
    ]
    assert [p.values["billable_seconds"] for p in front] == pytest.approx([10, 11, 12])
    assert [p.values["wall_seconds"] for p in front] == pytest.approx([10, 5.5, 4])
    assert all(p.values["accuracy"] == pytest.approx(0.8 * FINAL) for p in front)
    shown = summary.to_json_dict()
    assert [p["training_job"] for p in shown["pareto_front"]] == [p.job_id for p in front]
    assert shown["pareto_front"][0]["objectives"]["billable_seconds"] == pytest.approx(10)
    frame = analytics_dataframe(store, tuning_id)
    on_front = frame[frame["ParetoFront"].astype(bool)]
    assert sorted(on_front["TrainingJobName"]) == sorted(p.job_id for p in front)
    assert frame["Feasible"].isna().all()  # no constraints: not judged


def test_two_objectives_keep_only_what_no_trial_beats(store: Store) -> None:
    # Quality against billable seconds alone: x = 0.8 on one worker is as good and cheapest.
    summary = summarize(store, _run(store, _grid(objectives=[ACCURACY, BILLABLE])))
    assert [(p.hyperparameters["x"], p.instance_count) for p in summary.pareto_front or []] == [
        (0.8, 1)
    ]


def test_a_constraint_keeps_infeasible_trials_from_being_best_or_on_the_front(
    store: Store,
) -> None:
    tuning_id = _run(store, _grid(constraints=["wall_seconds <= 6"]))
    summary = summarize(store, tuning_id)
    best = summary.best
    assert best is not None and best.instance_count in (2, 3)  # one worker takes 10 s
    assert summary.record.best_objective == pytest.approx(0.8 * FINAL)
    assert [p.instance_count for p in summary.pareto_front or []] == [2, 3]
    assert summary.to_json_dict()["constraints"] == ["wall_seconds <= 6"]
    frame = analytics_dataframe(store, tuning_id)
    assert (frame["Feasible"] == (frame["InstanceCount"] > 1)).all()


def test_no_feasible_trial_means_no_best(store: Store) -> None:
    tuning_id = _run(store, _grid(constraints=["billable_seconds <= 5"]))
    summary = summarize(store, tuning_id)
    assert summary.record.best_training_job is None
    assert summary.pareto_front == []


def test_the_target_view_names_the_cheapest_and_the_fastest_trial_that_reached_it(
    store: Store,
) -> None:
    raw = _grid(objective_metric="accuracy", target_objective=0.45, max_parallel_jobs=9)
    del raw["objectives"]
    tuning_id = _run(store, raw)
    summary = summarize(store, tuning_id)
    target = summary.target
    assert target is not None and summary.pareto_front is None  # one objective: no front
    reached = [
        t
        for t in store.training_jobs_of(tuning_id)
        if t.status is not JobStatus.FAILED and (t.objective or 0) >= 0.45
    ]
    assert target.reached == len(reached) == 6  # x = 0.5 and 0.8, on each size
    assert target.cheapest is not None and target.fastest is not None
    assert target.cheapest.instance_count == 1
    assert target.cheapest.values["billable_seconds"] == pytest.approx(10)
    assert target.fastest.instance_count == 3
    assert target.fastest.values["wall_seconds"] == pytest.approx(4)
    assert summary.to_json_dict()["target"]["trials_reaching_it"] == 6


@pytest.mark.parametrize("searcher", ["Random", "Bayesian"])
def test_multi_objective_hyperband_runs_stops_and_finds_a_front(
    store: Store, searcher: str
) -> None:
    raw = _grid(
        strategy="Hyperband",
        hyperband={"min_resource": 1, "max_resource": MAX_RESOURCE, "eta": 3, "searcher": searcher},
        max_jobs=30,
        max_parallel_jobs=4,
        ranges={
            "x": {"type": "Continuous", "min_value": 0, "max_value": 1},
            "instance_count": {"type": "Integer", "min_value": 1, "max_value": 3},
        },
    )
    tuning_id = _run(store, raw)
    summary = summarize(store, tuning_id)
    assert summary.job_counts["Stopped"] > 0 and summary.job_counts["Completed"] > 0
    front = summary.pareto_front or []
    assert front
    completed = [t for t in store.training_jobs_of(tuning_id) if t.status is JobStatus.COMPLETED]
    for point in front:  # nothing completed beats a point of the front on all three
        values = point.values
        for other in completed:
            better = (
                (other.objective or 0) >= values["accuracy"]
                and (other.billable_seconds or 0) <= values["billable_seconds"]
                and (other.wall_seconds or 0) <= values["wall_seconds"]
            )
            same = other.id == point.job_id
            assert (
                same
                or not better
                or (
                    (other.objective, other.billable_seconds, other.wall_seconds)
                    == (values["accuracy"], values["billable_seconds"], values["wall_seconds"])
                )
            )


def test_a_replay_keeps_the_objectives_and_finds_the_same_front(store: Store) -> None:
    tuning_id = _run(store, _grid(constraints=["wall_seconds <= 6"]))
    replayed = replay_tuning(store, tuning_id, start_time=5_000.0)
    original, again = summarize(store, tuning_id), summarize(store, replayed.id)
    assert again.to_json_dict()["objectives"] == original.to_json_dict()["objectives"]

    def settings(summary: Any) -> list[tuple[object, int]]:
        return [(p.hyperparameters["x"], p.instance_count) for p in summary.pareto_front]

    assert settings(again) == settings(original) == [(0.8, 2), (0.8, 3)]


def test_a_restart_brings_back_every_objective_for_the_searcher_and_the_rungs(
    store: Store,
) -> None:
    from scaletune.simulation import SimulatedClock, SimulatedTrialRunner
    from scaletune.tuning import HyperbandScheduler, TuningController
    from scaletune.tuning._ranking import ByTradeOff
    from scaletune.tuning._tuner import _Run

    raw = _grid(
        strategy="Hyperband",
        hyperband={"min_resource": 1, "max_resource": MAX_RESOURCE, "eta": 3},
        max_jobs=12,
        ranges={
            "x": {"type": "Continuous", "min_value": 0, "max_value": 1},
            "instance_count": {"type": "Integer", "min_value": 1, "max_value": 3},
        },
    )
    spec = tuning_spec_from_dict(raw)
    tuning_id = _run(store, raw)
    clock = SimulatedClock(9_000.0)
    tuner = TuningController(SimulatedTrialRunner(store, RisingCurves(), clock), clock=clock)
    run = _Run(tuner, tuning_id, spec)
    run.restore()
    told = run.search.searcher._study.trials  # type: ignore[attr-defined]
    completed = {
        t.trial_number: t
        for t in store.training_jobs_of(tuning_id)
        if t.status is JobStatus.COMPLETED
    }
    assert completed
    for number, trial in completed.items():
        assert told[number].values == pytest.approx(
            [trial.objective, trial.billable_seconds, trial.wall_seconds]
        )
    scheduler = run.search.scheduler
    assert isinstance(scheduler, HyperbandScheduler) and isinstance(scheduler.ranking, ByTradeOff)
    first_rung = scheduler.ranking.points_at((0, 1))
    assert len(first_rung) == 12  # every trial reported step 1
    # Billable seconds as they stood at step 1: 1 + 1/n seconds on n workers, n + 1.
    assert sorted(set(first_rung[:, 1].round(6))) == [2.0, 3.0, 4.0]
