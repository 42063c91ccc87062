"""A tuning job as a user writes one: two ranges, curves of 100 steps, 16 trials at a time,
and nothing else set but what a variant names (its strategy or searcher). Each trial's
validation AUC is a saturating curve its hyperparameters set, with seeded noise; one report
a simulated second. Nothing trains."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from scaletune.simulation import Curve, CurvePoint
from scaletune.spec import TuningJobSpec, tuning_spec_from_dict

STEPS = 100
METRIC = "validation:auc"
HYPERBAND = {"min_resource": 1, "max_resource": STEPS}  # what a Hyperband job must say


def user_spec(trials: int, variant: str = "default") -> TuningJobSpec:
    raw: dict[str, Any] = {
        "name": f"user-{trials}",
        "objective_metric": METRIC,
        "objective_type": "Maximize",
        "strategy": "Hyperband",
        "hyperband": dict(HYPERBAND),
        "max_jobs": trials,
        "max_parallel_jobs": 16,
        "ranges": {
            "eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1.0},
            "max_depth": {"type": "Integer", "min_value": 1, "max_value": 10},
        },
        "training": {
            "name": "user",
            "algorithm": "xgboost",
            "instance_count": 2,
            "hyperparameters": {"num_round": STEPS, "eval_metric": "auc"},
            "channels": {
                "train": {"dataset": "breast-cancer"},
                "validation": {"dataset": "breast-cancer"},
            },
        },
    }
    if variant in ("Random", "Bayesian"):
        raw |= {"strategy": variant, "hyperband": None}
    elif variant in ("BOHB", "LastValueTPE", "LastValueCQR"):
        raw["hyperband"]["searcher"] = variant
    elif variant == "before":  # LastValueTPE's, its model an Optuna study (searchers.py)
        raw["hyperband"]["searcher"] = "LastValueTPE"
    elif variant == "LastValueCQR, value rungs":
        raw["hyperband"] |= {"searcher": "LastValueCQR", "rank_by": "value"}
    elif variant == "PBT":
        raw |= {"strategy": "PBT", "hyperband": None, "pbt": {"perturbation_interval": 10}}
        raw["training"]["checkpoint"] = {"enabled": True}
    elif variant == "several objectives":
        del raw["objective_metric"], raw["objective_type"]
        raw["objectives"] = [
            {"metric": METRIC, "type": "Maximize"},
            {"metric": "billable_seconds", "type": "Minimize"},
        ]
    return tuning_spec_from_dict(raw)


NOISE = np.random.default_rng(0).normal(0, 0.003, 65_536 + STEPS)  # drawn once: cheap curves
STEP_NUMBERS = np.arange(1, STEPS + 1)


class UserCurves:
    """AUC(step) = top - 0.4 exp(-step eta / 3): a higher ceiling for depths near 5, a faster
    rise for a larger eta; each trial's noise a stretch of one table, chosen by its
    hyperparameters (so the curves cost the benchmark little of what it measures)."""

    def curve(self, hyperparameters: Mapping[str, object], instance_count: int) -> Curve:
        eta = float(hyperparameters["eta"])  # type: ignore[arg-type]
        depth = int(hyperparameters["max_depth"])  # type: ignore[call-overload]
        start = zlib.crc32(f"{eta:.12g}/{depth}".encode()) % 65_536
        top = 0.95 - 0.01 * abs(depth - 5)
        aucs = top - 0.4 * np.exp(-STEP_NUMBERS * eta / 3) + NOISE[start : start + STEPS]
        points = [
            CurvePoint(step, 2.0 + step / instance_count, {METRIC: auc})
            for step, auc in enumerate(aucs.tolist(), start=1)
        ]
        return Curve(points, full_resource=STEPS)
