"""Hyperband on trials of a few steps: does it stop any, and what does stopping cost?

Real tuning jobs of the built-in DNN on scikit-learn's digits (or MNIST, `--data`), 5 epochs
a trial, one worker, 12 trials, 2 at a time; learning rate 1e-4..1 (log), momentum 0..0.99.
Hyperband's rungs are at epochs 1 and 3 (min_resource 1, max_resource 5, eta 3): neither has
the 4 reports a forecast needs, so with ranking by forecast (the default) the rungs now rank
values there.
Three tuning jobs a seed:

- Hyperband with its defaults (LastValueTPE proposals on 12 trials, ranked by forecast);
- Hyperband with Random proposals: the same configurations as the next, so that the two
  differ in the stopping alone;
- Random search without early stopping.

For each: the trials stopped, the best validation accuracy, billable worker-seconds.

    python -m benchmarks.tuning.short_trials --seeds 0 1 2 3 4
    python -m benchmarks.tuning.short_trials --data ../shared/data/mnist --seeds 0 1 2

Writes benchmarks/results/tuning_short_trials.{json,md} (`_mnist` with `--data`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._report import write
from scaletune.analysis import summarize
from scaletune.api import Session
from scaletune.spec import tuning_spec_from_dict
from scaletune.tuning import TuningController

EPOCHS = 5
TRIALS = 12
RANGES = {
    "learning_rate": {
        "type": "Continuous",
        "min_value": 1e-4,
        "max_value": 1.0,
        "scaling": "Logarithmic",
    },
    "momentum": {"type": "Continuous", "min_value": 0.0, "max_value": 0.99},
}
HYPERBAND = {"min_resource": 1, "max_resource": EPOCHS}
CASES: dict[str, dict[str, Any]] = {
    "Hyperband, defaults": {"strategy": "Hyperband", "hyperband": HYPERBAND},
    "Hyperband, Random proposals": {
        "strategy": "Hyperband",
        "hyperband": {**HYPERBAND, "searcher": "Random"},
    },
    "Random, no stopping": {"strategy": "Random"},
}
NO_STOPPING = "Random, no stopping"


def _tune(
    session: Session, strategy: dict[str, Any], seed: int, channel: dict[str, Any]
) -> dict[str, Any]:
    spec = tuning_spec_from_dict(
        {
            "objective_metric": "validation:accuracy",
            "objective_type": "Maximize",
            "ranges": RANGES,
            "max_jobs": TRIALS,
            "max_parallel_jobs": 2,
            "seed": seed,
            **strategy,
            "training": {
                "algorithm": "dnn",
                "instance_count": 1,
                "hyperparameters": {"epochs": EPOCHS, "seed": seed},
                "channels": {"train": channel, "validation": channel},
            },
        }
    )
    controller = TuningController(session.controller)
    tuning_id = controller.create(spec)
    controller.run(tuning_id, spec)
    summary = summarize(session.store, tuning_id)
    return {
        "seed": seed,
        "stopped": summary.job_counts["Stopped"],
        "completed": summary.job_counts["Completed"],
        "failed": summary.job_counts["Failed"],
        "best": summary.record.best_objective,
        "billable_seconds": summary.billable_seconds,
        "wall_seconds": summary.record.wall_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--data", type=Path, help="MNIST's folder (default: digits)")
    args = parser.parse_args()
    channel: dict[str, Any] = (
        {"dataset": "digits"}
        if args.data is None
        else {"dataset": "mnist", "dataset_file": str(args.data)}
    )
    data = "digits" if args.data is None else "MNIST"
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in CASES}
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "s.db") as session:
        _tune(session, CASES[NO_STOPPING], 99, channel)  # workers warm, data read: no cold start
        for seed in args.seeds:
            for label, strategy in CASES.items():
                runs[label].append(_tune(session, strategy, seed, channel))
                print(label, runs[label][-1], flush=True)
    rows, summaries = _table(runs)
    write(
        "tuning_short_trials" + ("" if args.data is None else "_mnist"),
        f"Hyperband on {EPOCHS}-epoch trials: {data} DNN, {TRIALS} trials a job",
        {
            "data": data,
            "seeds": args.seeds,
            "epochs": EPOCHS,
            "trials": TRIALS,
            "ranges": RANGES,
            "cases": CASES,
            "summaries": summaries,
            "runs": runs,
        },
        rows,
        NOTES,
    )


def _table(
    runs: dict[str, list[dict[str, Any]]],
) -> tuple[list[list[str]], dict[str, dict[str, float]]]:
    plain = {run["seed"]: run for run in runs[NO_STOPPING]}
    rows = [
        [
            "tuning job",
            "trials stopped, mean of 12",
            "best validation accuracy, mean",
            "best minus no stopping's, points: mean (worst)",
            "billable worker-s, mean",
            "cost against no stopping",
        ]
    ]
    summaries: dict[str, dict[str, float]] = {}
    for label, mine in runs.items():
        gaps = [100 * (run["best"] - plain[run["seed"]]["best"]) for run in mine]
        ratios = [run["billable_seconds"] / plain[run["seed"]]["billable_seconds"] for run in mine]
        summary = {
            "stopped_mean": statistics.mean(run["stopped"] for run in mine),
            "best_mean": statistics.mean(run["best"] for run in mine),
            "gap_points_mean": statistics.mean(gaps),
            "gap_points_worst": min(gaps),
            "billable_mean": statistics.mean(run["billable_seconds"] for run in mine),
            "cost_ratio_median": statistics.median(ratios),
        }
        summaries[label] = summary
        rows.append(
            [
                label,
                f"{summary['stopped_mean']:.1f}",
                f"{summary['best_mean']:.4f}",
                f"{summary['gap_points_mean']:+.2f} ({summary['gap_points_worst']:+.2f})",
                f"{summary['billable_mean']:.1f}",
                f"{summary['cost_ratio_median']:.2f}x (median)",
            ]
        )
    return rows, summaries


NOTES = """
One tuning job a case and seed, the trials' own seed the job's; 1 worker a trial, 2 trials at
a time, on 2 cores, the workers warm (a tuning job before the first). Best: the tuning job's
best validation accuracy. The gap and the cost are against Random search without stopping on
the same seed.
"""


if __name__ == "__main__":
    main()
