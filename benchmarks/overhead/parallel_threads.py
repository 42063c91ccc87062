"""Parallel trials on one machine: each worker's threads the machine's cores shared among the
workers training at once (now), against the cores shared among its own job's workers alone
(before), which put two threads per one-worker trial on every core.

Two tuning jobs of 4 trials, all 4 at once, one worker each, on the local backend:
- the DNN: an MLP (128 hidden units) on MNIST, SGD, batch 64, 2 epochs;
- XGBoost: bank marketing, 100 rounds, depth 6.
Each runs with the old rule and the new one, rounds alternating, so that the machine's drift
falls on both. Reported: the tuning job's wall time (median of the rounds, and the ratio
within each back-to-back pair) and the best validation metric (the same work either way).

    .venv/bin/python -m benchmarks.overhead.parallel_threads [--rounds 3]

Writes benchmarks/results/parallel_threads.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._report import BANK_MARKETING_FILE, MNIST_FOLDER, Paired, spread, write
from scaletune.analysis import summarize
from scaletune.api import Session
from scaletune.spec import TuningJobSpec, tuning_spec_from_dict
from scaletune.store import TrainingJobRecord
from scaletune.training import PreparedJob, TrainingController
from scaletune.tuning import TuningController

TRIALS = 4
LABELS = {"dnn": "DNN, MNIST MLP, 2 epochs", "xgboost": "XGBoost, bank, 100 rounds"}


class _JobAlone(TrainingController):
    """The rule before: each job's workers take the cores as if the job ran alone."""

    def run(self, job: PreparedJob, *args: Any, **kwargs: Any) -> TrainingJobRecord:
        return super().run(dataclasses.replace(job, concurrent_workers=None), *args, **kwargs)


def _spec(algorithm: str) -> TuningJobSpec:
    if algorithm == "dnn":
        channel = {"dataset": "mnist", "dataset_file": str(MNIST_FOLDER)}
        training = {
            "algorithm": "dnn",
            "hyperparameters": {"model": "mlp", "hidden_units": 128, "epochs": 2},
            "checkpoint": {"enabled": False},
        }
        objective, ranges = "validation:accuracy", {"learning_rate": (0.01, 0.2)}
    else:
        channel = {"dataset": "bank-marketing", "dataset_file": str(BANK_MARKETING_FILE)}
        training = {
            "algorithm": "xgboost",
            "hyperparameters": {"num_round": 100, "max_depth": 6, "eval_metric": "auc"},
        }
        objective, ranges = "validation:auc", {"eta": (0.05, 0.5)}
    return tuning_spec_from_dict(
        {
            "objective_metric": objective,
            "objective_type": "Maximize",
            "strategy": "Random",
            "max_jobs": TRIALS,
            "max_parallel_jobs": TRIALS,
            "seed": 0,
            "ranges": {
                name: {"type": "Continuous", "min_value": low, "max_value": high}
                for name, (low, high) in ranges.items()
            },
            "training": {
                **training,
                "instance_count": 1,
                "channels": {"train": channel, "validation": channel},
            },
        }
    )


def _tune(controller: TrainingController, spec: TuningJobSpec) -> tuple[float, float]:
    tuner = TuningController(controller)
    tuning_id = tuner.create(spec)
    started = time.perf_counter()
    tuner.run(tuning_id, spec)
    wall = time.perf_counter() - started
    return wall, float(summarize(controller.store, tuning_id).record.best_objective or 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: need 1 or more")
    results: dict[str, Any] = {}
    rows = [["job (4 one-worker trials at once)", "rule", "wall s, median (min–max)", "best"]]
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        session.backend.prestart(TRIALS)
        rules = {
            "job alone (before)": _JobAlone(
                session.store, session.backend, session.location.jobs_dir
            ),
            "shared (now)": session.controller,
        }
        for algorithm in ("dnn", "xgboost"):
            spec = _spec(algorithm)
            _tune(session.controller, spec)  # data prepared and cached, workers warm
            walls: dict[str, list[float]] = {rule: [] for rule in rules}
            best: dict[str, float] = {}
            for round_ in range(args.rounds):
                order = list(rules) if round_ % 2 == 0 else list(reversed(rules))
                for rule in order:
                    wall, best[rule] = _tune(rules[rule], spec)
                    walls[rule].append(wall)
            paired = Paired.of(walls["job alone (before)"], walls["shared (now)"])
            results[algorithm] = {"walls": walls, "best": best, **paired.results()}
            label = LABELS[algorithm]
            for rule, stats in zip(rules, (paired.plain, paired.ours), strict=True):
                rows.append([label, rule, spread(stats), f"{best[rule]:.4f}"])
            rows.append(
                [label, "now / before", f"{paired.ratio:.2f}", f"pairs: {spread(paired.pairs)}"]
            )
    write(
        "parallel_threads",
        "Parallel trials: threads per worker shared among the workers training at once",
        {"settings": vars(args), "cores": os.cpu_count(), "results": results},
        rows,
        f"""
{TRIALS} trials at once, one worker each, on the local backend (warm pool), {args.rounds}
rounds alternating the rules. Before: each worker used cores // its job's workers threads
({os.cpu_count()} // 1 here), so {TRIALS} trials ran {TRIALS}x that many threads on the
machine's {os.cpu_count()} cores. Now: cores // the tuning job's workers at once (max_parallel_jobs
x instance_count), at least 1. "pairs": the ratio within each back-to-back pair.
""",
    )


if __name__ == "__main__":
    main()
