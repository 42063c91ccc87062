"""Simulated tuning jobs of any size, and a small one ranked by hand, for tests that need stored
trials."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scaletune.simulation import Curve, CurvePoint, simulate_tuning
from scaletune.spec import tuning_spec_from_dict
from scaletune.store import Store, TuningJobRecord

MAX_RESOURCE = 9


class RisingCurves:
    """accuracy = x * (1 - e^-step): the larger x, the better; 1 + step/workers seconds."""

    def curve(self, hyperparameters: Mapping[str, object], instance_count: int) -> Curve:
        x = float(hyperparameters["x"])  # type: ignore[arg-type]
        points = [
            CurvePoint(step, 1.0 + step / instance_count, {"accuracy": x * (1 - math.exp(-step))})
            for step in range(1, MAX_RESOURCE + 1)
        ]
        return Curve(points, full_resource=MAX_RESOURCE)


def simulated_tuning(
    store: Store, trials: int, *, seed: int = 0, completion: Mapping[str, Any] | None = None
) -> TuningJobRecord:
    spec = tuning_spec_from_dict(
        {
            "name": "simulated",
            "objective_metric": "accuracy",
            "strategy": "Hyperband",
            # rungs 1 and 3 rank values (a forecast needs 4 reports: they would judge nothing)
            "hyperband": {
                "min_resource": 1,
                "max_resource": MAX_RESOURCE,
                "eta": 3,
                "rank_by": "value",
            },
            "max_jobs": trials,
            "max_parallel_jobs": 4,
            "seed": seed,
            "completion": completion or {},
            "ranges": {
                "x": {"type": "Continuous", "min_value": 0, "max_value": 1},
                "instance_count": {"type": "Integer", "min_value": 1, "max_value": 3},
            },
            "training": {
                "algorithm": "script",
                "instance_count": 1,
                "script": {"entry_point": "simulated-trial"},
            },
        }
    )
    return simulate_tuning(spec, RisingCurves(), store, start_time=1_000.0)


def late_mean_x(folder: Path, searcher: str, *, trials: int = 120) -> float:
    """The mean x of the last half of a simulated Hyperband job's proposals on RisingCurves
    with `hyperband.searcher = searcher` (a model should propose larger x than random)."""
    spec = tuning_spec_from_dict(
        {
            "objective_metric": "accuracy",
            "strategy": "Hyperband",
            "hyperband": {"max_resource": MAX_RESOURCE, "searcher": searcher},
            "max_jobs": trials,
            "max_parallel_jobs": 4,
            "seed": 0,
            "ranges": {"x": {"type": "Continuous", "min_value": 0, "max_value": 1}},
            "training": {"algorithm": "script", "script": {"entry_point": "simulated"}},
        }
    )
    with Store(f"sqlite:///{folder / searcher}.db") as store:
        record = simulate_tuning(spec, RisingCurves(), store)
        xs = [float(t.hyperparameters["x"]) for t in store.training_jobs_of(record.id)]
    assert not any(math.isnan(x) for x in xs)
    return sum(xs[trials // 2 :]) / (trials - trials // 2)


# x -> (step, accuracy) reports. At step 1 the winner is second, one place short of being kept;
# from step 3 on the order is the end's. x=3 reports only at steps 2, 4 and 9: a rung takes
# the first report at or past it, before the next rung.
HAND_CURVES = {
    0: [(1, 0.9), (3, 0.5), (9, 0.1)],
    1: [(1, 0.7), (3, 0.6), (9, 0.2)],
    2: [(1, 0.8), (3, 0.8), (9, 0.9)],  # the winner
    3: [(2, 0.6), (4, 0.7), (9, 0.3)],
}


# Two curves whose early values rank them against the end: a fast learner that levels off at
# 0.70 and a slow one heading for 0.90 that stands below it to step 5 (pow3 curves, as a
# forecast fits them), reported at every step to 27.
SLOW_AND_FAST = {
    0: [(step, 0.70 - 0.20 * step**-2.0) for step in range(1, 28)],
    1: [(step, 0.90 - 0.50 * step**-0.5) for step in range(1, 28)],  # the winner
}


class HandCurves:
    def __init__(self, sign: float, curves: Mapping[int, list[tuple[int, float]]]) -> None:
        self._sign = sign  # -1: the same curves as a loss
        self._curves = curves

    def curve(self, hyperparameters: Mapping[str, object], instance_count: int) -> Curve:
        reports = self._curves[int(hyperparameters["x"])]  # type: ignore[call-overload]
        points = [CurvePoint(step, float(step), {"score": self._sign * v}) for step, v in reports]
        return Curve(points, full_resource=reports[-1][0])


def hand_ranked_job(
    store: Store,
    objective_type: str = "Maximize",
    curves: Mapping[int, list[tuple[int, float]]] = HAND_CURVES,
) -> TuningJobRecord:
    """Grid search over x on `curves` (HAND_CURVES: x = 0..3; the same curves as a loss with
    "Minimize")."""
    spec: dict[str, Any] = {
        "objective_metric": "score",
        "objective_type": objective_type,
        "strategy": "Grid",
        "max_jobs": len(curves),
        "max_parallel_jobs": 2,
        "ranges": {"x": {"type": "Integer", "min_value": 0, "max_value": len(curves) - 1}},
        "training": {"algorithm": "script", "script": {"entry_point": "hand"}},
    }
    sign = 1.0 if objective_type == "Maximize" else -1.0
    return simulate_tuning(tuning_spec_from_dict(spec), HandCurves(sign, curves), store)
