"""The reference's collapse on an asynchronous parameter server, and what each remedy does.

MNIST MLP on 4 workers, 5 epochs, at one worker's settings and at the two settings that sent
the reference's server to chance (lr 0.2; momentum 0.99). Each is run synchronously (the
target), asynchronously as the reference does (stale gradients applied as they come, the
momentum asked for kept), and with each of scaletune's remedies: the momentum asynchrony adds
taken off the optimiser's (`implicit_momentum = "subtract"`), the step divided by the
staleness (`staleness_compensation = "lr"`), delay compensation (`"dc"`), their pairs, and the
default: delay compensation with the momentum taken off and the step that costs given back
while the loss falls (`implicit_momentum = "adapt"`).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._report import MNIST_FOLDER, gap_points, interval_text, write
from scaletune.api import Estimator, Session
from scaletune.experiment._plans import DNN_NAIVE

ONE_WORKER = {k: v for k, v in DNN_NAIVE.items() if k != "epochs"}  # the experiment's
SETTINGS: dict[str, dict[str, Any]] = {
    "one worker's": {},
    "lr 0.2": {"learning_rate": 0.2},
    "momentum 0.99": {"momentum": 0.99},
}
ASYNC = {"strategy": "parameter_server", "mode": "async"}
REFERENCE = {**ASYNC, "staleness_compensation": "none", "implicit_momentum": "ignore"}
MODES: dict[str, dict[str, Any]] = {
    "sync": {"strategy": "parameter_server", "mode": "sync"},
    "async, as the reference": REFERENCE,
    "async, adapt + dc (default)": {
        **ASYNC,
        "implicit_momentum": "adapt",
        "staleness_compensation": "auto",
    },
    "async, subtract implicit momentum": {**REFERENCE, "implicit_momentum": "subtract"},
    "async, lr / staleness": {**REFERENCE, "staleness_compensation": "lr"},
    "async, dc": {**REFERENCE, "staleness_compensation": "dc"},
    "async, subtract + lr / staleness": {
        **REFERENCE,
        "implicit_momentum": "subtract",
        "staleness_compensation": "lr",
    },
    "async, subtract + dc": {
        **REFERENCE,
        "implicit_momentum": "subtract",
        "staleness_compensation": "dc",
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--data", type=Path, default=MNIST_FOLDER)
    args = parser.parse_args()
    channel = {"dataset": "mnist", "dataset_file": str(args.data)}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        for seed in args.seeds:
            for setting, changes in SETTINGS.items():
                for mode, distribution in MODES.items():
                    hyperparameters = {**ONE_WORKER, **changes, "epochs": args.epochs, "seed": seed}
                    record = (
                        Estimator(
                            "dnn",
                            hyperparameters,
                            instance_count=args.workers,
                            distribution=distribution,
                            session=session,
                        )
                        .fit({"train": channel, "validation": channel, "test": channel})
                        .describe()
                    )
                    metrics = record.final_metrics
                    runs.append(
                        {
                            "setting": setting,
                            "mode": mode,
                            "seed": seed,
                            "distribution": distribution,
                            "hyperparameters": hyperparameters,
                            "status": record.status.value,
                            "validation_accuracy": metrics.get("validation:accuracy"),
                            "test_accuracy": metrics.get("test:accuracy"),
                            "staleness_mean": metrics.get("ps:staleness_mean"),
                            "wall_seconds": record.wall_seconds,
                        }
                    )
                    print(runs[-1], flush=True)
    _report(args, runs)


def _report(args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    rng = np.random.default_rng(0)
    table = [["setting", "mode", "validation acc.", "vs sync (points)", "test acc.", "vs sync"]]
    summaries = []
    for setting in SETTINGS:
        sync = {r["seed"]: r for r in runs if (r["setting"], r["mode"]) == (setting, "sync")}
        for mode in MODES:
            mine = [r for r in runs if (r["setting"], r["mode"]) == (setting, mode)]
            row: dict[str, Any] = {"setting": setting, "mode": mode}
            cells = [setting, mode]
            for key in ("validation_accuracy", "test_accuracy"):
                mean, interval = gap_points(mine, sync, key, rng)
                row[key], row[f"{key}_gap_points"] = mean, interval
                cells += [f"{mean:.4f}", "" if mode == "sync" else interval_text(interval)]
            table.append(cells)
            summaries.append(row)
    notes = f"""
{args.workers} workers, MLP 784-128-10, batch 64 a worker, {args.epochs} epochs, seeds
{", ".join(map(str, args.seeds))}; "vs sync": the mean over seeds of the paired difference from
the synchronous server at the same settings and seed, in accuracy points (95 % bootstrap
interval). Goal: with a remedy on, within 0.5 point of the synchronous mode at the reference's
collapse settings (lr 0.2; momentum 0.99).
"""
    write(
        "convergence_async_staleness",
        f"Asynchronous parameter server: the reference's collapse and its remedies "
        f"({args.workers} workers, MNIST)",
        {"runs": runs, "summaries": summaries},
        table,
        notes,
    )


if __name__ == "__main__":
    main()
