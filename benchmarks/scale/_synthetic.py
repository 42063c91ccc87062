"""A synthetic tuning job of any size: Hyperband over XGBoost-like ranges, each trial's
validation AUC a saturating curve its hyperparameters set (with seeded noise), one report a
simulated second. Nothing trains, so 100,000 trials cost only the tuning loop and the store."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

from scaletune.simulation import Curve, CurvePoint
from scaletune.spec import TuningJobSpec, tuning_spec_from_dict

MAX_RESOURCE = 27
METRIC = "validation:auc"


def spec(trials: int, *, parallel: int = 16, seed: int = 0) -> TuningJobSpec:
    return tuning_spec_from_dict(
        {
            "name": f"scale-{trials}",
            "objective_metric": METRIC,
            "objective_type": "Maximize",
            "strategy": "Hyperband",
            "max_jobs": trials,
            "max_parallel_jobs": parallel,
            "seed": seed,
            # rungs ranking values, as when the committed store and console figures were
            # measured; what forecasts cost a rung: benchmarks/tuning/forecast_cost.py
            "hyperband": {
                "min_resource": 1,
                "max_resource": MAX_RESOURCE,
                "eta": 3,
                "rank_by": "value",
            },
            "ranges": {
                "eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1.0},
                "max_depth": {"type": "Integer", "min_value": 1, "max_value": 10},
                "min_child_weight": {"type": "Continuous", "min_value": 1, "max_value": 10},
            },
            "training": {
                "name": "scale",
                "algorithm": "xgboost",
                "instance_count": 2,
                "hyperparameters": {"num_round": MAX_RESOURCE, "eval_metric": "auc"},
                "channels": {
                    "train": {"dataset": "breast-cancer"},
                    "validation": {"dataset": "breast-cancer"},
                },
            },
        }
    )


class SyntheticCurves:
    """AUC(step) = top - gap * exp(-step * eta / 3): a higher ceiling for depths near 5,
    faster rise for a larger eta; each trial's noise seeded by its hyperparameters."""

    def curve(self, hyperparameters: Mapping[str, object], instance_count: int) -> Curve:
        eta = float(hyperparameters["eta"])  # type: ignore[arg-type]
        depth = int(hyperparameters["max_depth"])  # type: ignore[call-overload]
        weight = float(hyperparameters["min_child_weight"])  # type: ignore[arg-type]
        noise = random.Random(f"{eta:.12g}/{depth}/{weight:.12g}")
        top = 0.95 - 0.01 * abs(depth - 5) - 0.002 * weight
        points = []
        for step in range(1, MAX_RESOURCE + 1):
            auc = top - 0.4 * math.exp(-step * eta / 3) + noise.gauss(0, 0.003)
            points.append(CurvePoint(step, 2.0 + step / instance_count, {METRIC: auc}))
        return Curve(points, full_resource=MAX_RESOURCE)
