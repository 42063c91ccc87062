"""scaletune's strategies on the simulated backend: the real tuning loop, searchers and
schedulers, with every report written to a store (SQLite), as in a real run."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks.tuning._problem import EPOCHS, METRIC, MIN_RESOURCE, SPACE, Task
from benchmarks.tuning._simulator import Trajectory
from scaletune.simulation import simulate_tuning
from scaletune.spec import TuningJobSpec, tuning_spec_from_dict
from scaletune.store import Store

# Every setting spelled out: Hyperband's defaults changed with these measurements.
ALL_BRACKETS = None


def _hyperband(searcher: str, brackets: int | None, **more: str) -> dict[str, Any]:
    return {
        "strategy": "Hyperband",
        "hyperband": {
            "min_resource": MIN_RESOURCE,
            "max_resource": EPOCHS,
            "searcher": searcher,
            "brackets": brackets,
            "rank_by": "value",
            **more,
        },
    }


STRATEGIES: dict[str, dict[str, Any]] = {
    "Random": {"strategy": "Random"},
    "Bayesian": {"strategy": "Bayesian"},
    "Hyperband": _hyperband("Random", ALL_BRACKETS),
    "Bayesian+Hyperband": _hyperband("Bayesian", ALL_BRACKETS),
    # Pausing instead of stopping (trials resume from their checkpoints; a resume pays the
    # start-up again), and one bracket (plain asynchronous successive halving).
    "Hyperband promotion": _hyperband("Random", ALL_BRACKETS, type="promotion"),
    "ASHA": _hyperband("Random", 1),  # scaletune's defaults, but for random proposals
    # The same, its first trial at the middle of every range (as older Syne Tune releases
    # start by default): measured to choose the default.
    "ASHA middle first": {**_hyperband("Random", 1), "first_configurations": [{}]},
    "ASHA promotion": _hyperband("Random", 1, type="promotion"),
    # BOHB-style proposals: TPE fitted on the highest rung with enough results.
    "BOHB": _hyperband("BOHB", ALL_BRACKETS),
    "BOHB ASHA": _hyperband("BOHB", 1),
    "BOHB ASHA promotion": _hyperband("BOHB", 1, type="promotion"),
    # TPE on every trial's latest report, running ones included (as Syne Tune's BOHB).
    "LastValueTPE ASHA": _hyperband("LastValueTPE", 1),
    # The same, each rung ranking where the trials' curves point at the end (pow3 forecasts).
    "LastValueTPE ASHA forecast": _hyperband("LastValueTPE", 1, rank_by="forecast"),
    # The same, proposals from conformalized quantile regression (the model of Syne Tune's
    # ASHA-CQR) on every trial's latest report.
    "LastValueCQR ASHA forecast": _hyperband("LastValueCQR", 1, rank_by="forecast"),
    "LastValueCQR ASHA": _hyperband("LastValueCQR", 1),  # the same, rungs ranking values
    # LastValueTPE's proposals until 32 trials have values, LastValueCQR's after.
    "LastValueTPEThenCQR ASHA forecast": _hyperband("LastValueTPEThenCQR", 1, rank_by="forecast"),
    # Each bracket's chance scaled by how well its first rung has ranked as the end.
    "Hyperband adaptive": _hyperband("Random", ALL_BRACKETS, bracket_weights="adaptive"),
    "BOHB adaptive": _hyperband("BOHB", ALL_BRACKETS, bracket_weights="adaptive"),
    "Bayesian+ASHA promotion": _hyperband("Bayesian", 1, type="promotion"),
}


def lcbench_ranges() -> dict[str, Any]:
    """LCBench's seven hyperparameters as a tuning job's ranges, each on its own scale."""
    return {
        name: {
            "type": "Integer" if integer else "Continuous",
            "min_value": int(low) if integer else low,
            "max_value": int(high) if integer else high,
            "scaling": "Logarithmic" if log else "Linear",
        }
        for name, (low, high, integer, log) in SPACE.items()
    }


def tuning_spec(strategy: str, task: Task, seed: int) -> TuningJobSpec:
    ranges = lcbench_ranges()
    return tuning_spec_from_dict(
        {
            "name": f"lcbench-{task.name}",
            "objective_metric": METRIC,
            "objective_type": "Maximize",
            **STRATEGIES[strategy],
            "ranges": ranges,
            **budget_and_trials(task, seed),
        }
    )


def budget_and_trials(task: Task, seed: int) -> dict[str, Any]:
    """What every LCBench tuning job shares: the time budget, the setting's trials at a time, the
    seed, and trials that stand for the task's curves."""
    return {
        "max_jobs": 10_000,  # the budget is time
        "max_parallel_jobs": task.setting.workers,
        "max_runtime_seconds": task.budget_seconds,
        "seed": seed,
        "training": {
            "algorithm": "script",
            "script": {"entry_point": f"yahpo-lcbench {task.name}"},  # what trials stand for
        },
    }


def run_scaletune(strategy: str, task: Task, seed: int) -> Trajectory:
    with (
        tempfile.TemporaryDirectory(prefix="scaletune-bench-") as folder,
        Store(f"sqlite:///{Path(folder) / 'store.db'}") as store,
    ):
        record = simulate_tuning(tuning_spec(strategy, task, seed), task.source, store)
        points = [
            (point.time, point.value)
            for trial in store.training_jobs_of(record.id)
            for point in store.metrics(trial.id, METRIC)
        ]
    return sorted(points)
