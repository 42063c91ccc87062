"""Advice from a stored elastic run: each size it ran at is measured from its own attempts,
and the recommendation comes as an elastic range as well."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scaletune.advice import advise_job
from scaletune.advice._predict import SizePrediction, elastic_range
from scaletune.spec import training_spec_from_dict
from scaletune.store import JobOutcome, JobStatus, MetricPoint, NewTrainingJob, Store

METRIC = "validation:auc"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'advice.db'}") as opened:
        yield opened


def _elastic_run(store: Store, phases: list[tuple[int, int, float]]) -> str:
    """A completed elastic XGBoost job that ran `steps` steps at `workers` workers, `seconds`
    a step, phase after phase, with a 5 s restart between phases and 2 s to start."""
    spec = training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "instance_count": {"min": 1, "max": 3},
            "hyperparameters": {"num_round": sum(steps for _, steps, _ in phases)},
            "channels": {"train": {"dataset": "breast-cancer"}},
            "checkpoint": {"every_steps": 5},
        }
    )
    store.create_training_job(
        NewTrainingJob("job-1", None, "xgboost", spec.model_dump(mode="json"), {}, 3, 0.0, "")
    )
    now, step, points = 2.0, 0, []
    for number, (workers, steps, seconds) in enumerate(phases, start=1):
        store.attempts.start("job-1", number, now - 2.0)
        store.attempts.set_workers("job-1", number, [f"pid {i}" for i in range(workers)])
        for _ in range(steps):
            step, now = step + 1, now + seconds
            points.append(MetricPoint(METRIC, step, 0.9 + step / 1000, now))
        store.attempts.end("job-1", number, status=JobStatus.STOPPED, end_time=now, reason="x")
        now += 5.0
    store.append_metrics("job-1", points)
    wall = now - 5.0
    store.finish_training_job(
        "job-1", JobOutcome(JobStatus.COMPLETED, 0.0, wall, wall, 2.5 * wall, {METRIC: 0.94})
    )
    return "job-1"


def test_an_elastic_run_measures_each_size_it_ran_at(store: Store) -> None:
    # 30 steps on 3 workers at 0.3 s, then 10 on 2 at 0.4 s: t(n) = 0.75 / n + 0.025 (n - 1).
    job = _elastic_run(store, [(3, 30, 0.3), (2, 10, 0.4)])
    advice = advise_job(store, job, metric=METRIC)
    assert [p.measured for p in advice.predictions] == [False, True, True, False, False, False]
    assert advice.prediction(3).step_seconds == pytest.approx(0.3)
    assert advice.prediction(2).step_seconds == pytest.approx(0.4)
    assert advice.prediction(1).step_seconds == pytest.approx(0.75)
    assert advice.basis[1] == ("step time 0.3 s on 3 worker(s), 0.4 s on 2 (the same run, resized)")
    # The restart between the sizes is time outside steps (2 s to start, 5 s to restart),
    # not slower steps: 40 steps to the quality on 3 workers take 7 + 40 x 0.3 s.
    assert advice.steps_to_quality == 40
    assert advice.prediction(3).wall_seconds == pytest.approx(7.0 + 12.0)
    assert advice.prediction(1).billable_seconds == pytest.approx(7.0 + 30.0)


def test_one_size_is_measured_as_before(store: Store) -> None:
    job = _elastic_run(store, [(2, 20, 0.5)])
    advice = advise_job(store, job, metric=METRIC)
    assert [p.measured for p in advice.predictions] == [False, True, False, False, False, False]
    assert advice.prediction(2).step_seconds == pytest.approx(0.5)


def _prediction(workers: int, billable: float) -> SizePrediction:
    return SizePrediction(workers, 10, 1.0, billable / workers, billable, measured=False)


def test_the_elastic_range_keeps_every_size_within_the_cost_ratio() -> None:
    costs = {1: 10.0, 2: 12.0, 3: 14.0, 4: 20.0}  # the cheapest 10: 1.5x allows up to 15
    predictions = [_prediction(n, cost) for n, cost in costs.items()]
    assert elastic_range(predictions, 3, 1.5) == (1, 3)
    assert elastic_range(predictions, 3, 1.3) == (1, 3)  # up to 13: 3 is the recommended one
    costs = {1: 14.0, 2: 10.0, 3: 12.0, 4: 20.0}  # one worker alone is slow enough to cost more
    predictions = [_prediction(n, cost) for n, cost in costs.items()]
    assert elastic_range(predictions, 3, 1.25) == (2, 3)
    costs = {1: 10.0, 2: 16.0, 3: 14.0, 4: 20.0}  # a size between that costs too much ends it
    predictions = [_prediction(n, cost) for n, cost in costs.items()]
    assert elastic_range(predictions, 3, 1.5) == (3, 3)
