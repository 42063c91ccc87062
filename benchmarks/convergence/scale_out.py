"""MNIST at 1..16 workers with one worker's settings: no scaling, linear scaling with a
warm-up epoch, and AdaScale.

Each size N trains on a global batch N x b. Up to `--max-processes` workers are real processes
(2 cores here); beyond that, N = processes x micro-batches accumulated per update, which
averages the same N gradients of batch b per update (the data cut into fewer shards). Every
method starts from the same one-worker settings, and every seed is paired with the one-worker
run of the same seed (same initial weights and shuffling seed).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._report import MNIST_FOLDER, gap_points, interval_text, write
from scaletune.algorithms.dnn._batches import batches_per_epoch
from scaletune.api import Estimator, Session
from scaletune.data import prepare_mnist
from scaletune.experiment._plans import DNN_NAIVE

# The convergence experiment's one-worker settings, less the model and epochs chosen here.
ONE_WORKER = {k: v for k, v in DNN_NAIVE.items() if k not in ("model", "epochs")}
METHODS: dict[str, dict[str, Any]] = {
    "none": {"lr_scaling": "none"},
    "linear + 1 warm-up epoch": {"lr_scaling": "linear", "warmup_epochs": 1},
    # the gain estimated on every update (the default until pooling; the runs' name kept)
    "adascale": {"lr_scaling": "adascale", "adascale_every_updates": 1},
    # estimated on every 4th update from the 4 measured since
    "adascale, gain pooled over 4 updates": {"lr_scaling": "adascale", "adascale_every_updates": 4},
}


@dataclass(frozen=True)
class Run:
    model: str
    workers: int  # N: gradients of batch b averaged per update
    method: str
    seed: int

    def layout(self, max_processes: int) -> tuple[int, int]:
        """Processes and micro-batches each accumulates."""
        processes = min(self.workers, max_processes)
        return processes, self.workers // processes


def _train(
    session: Session, run: Run, epochs: int, max_processes: int, channel: dict[str, Any]
) -> dict[str, Any]:
    processes, accumulate = run.layout(max_processes)
    hyperparameters = {
        **ONE_WORKER,
        "model": run.model,
        "epochs": epochs,
        "seed": run.seed,
        "gradient_accumulation_steps": accumulate,
        **METHODS[run.method],
    }
    job = Estimator("dnn", hyperparameters, instance_count=processes, session=session).fit(
        {"train": channel, "validation": channel, "test": channel}
    )
    record = job.describe()
    metrics = record.final_metrics
    return {
        "model": run.model,
        "workers": run.workers,
        "processes": processes,
        "accumulate": accumulate,
        "method": run.method,
        "seed": run.seed,
        "status": record.status.value,
        "validation_accuracy": metrics.get("validation:accuracy"),
        "test_accuracy": metrics.get("test:accuracy"),
        "updates": metrics.get("train:updates"),
        "data_epochs": metrics.get("train:data_epochs"),
        "gain": metrics.get("adascale:gain"),
        "b_simple": metrics.get("gns:b_simple"),
        "billable_seconds": record.billable_seconds,
        "wall_seconds": record.wall_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", nargs="+", default=["mlp", "cnn"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 2, 4, 8, 16])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=5, help="one worker's epochs (MLP)")
    parser.add_argument("--cnn-epochs", type=int, default=2)
    parser.add_argument("--max-processes", type=int, default=4)
    parser.add_argument("--data", type=Path, default=MNIST_FOLDER)
    parser.add_argument("--name", default="convergence_scale_out")
    parser.add_argument(
        "--also",
        type=Path,
        nargs="*",
        default=[],
        help="results files of earlier runs (other seeds, other methods) to report with these; "
        "a run made again replaces its earlier one",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=list(METHODS),
        default=list(METHODS),
        help="run only these (the one-worker baseline runs with 'none')",
    )
    args = parser.parse_args()
    channel = {"dataset": "mnist", "dataset_file": str(args.data)}
    train_rows = prepare_mnist(args.data)["train"].n_rows
    runs: list[dict[str, Any]] = [
        run for earlier in args.also for run in json.loads(earlier.read_text())["runs"]
    ]
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        for model in args.models:
            epochs = args.epochs if model == "mlp" else args.cnn_epochs
            for seed in args.seeds:
                for workers in args.sizes:
                    for method in args.methods if workers > 1 else ["none"]:
                        result = _train(
                            session,
                            Run(model, workers, method, seed),
                            epochs,
                            args.max_processes,
                            channel,
                        )
                        if result["updates"] is None:  # a fixed pace: epochs x its own
                            batches = batches_per_epoch(
                                train_rows, result["processes"], ONE_WORKER["batch_size"]
                            )
                            result["updates"] = epochs * -(-batches // result["accumulate"])
                            result["data_epochs"] = float(epochs)
                        result["epochs"] = epochs
                        runs.append(result)
                        print(result, flush=True)
    runs = _latest(runs)
    args.seeds = sorted({run["seed"] for run in runs})
    args.sizes = sorted({run["workers"] for run in runs})  # one worker's too, from earlier files
    _report(args, runs)


def _latest(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs, each (model, N, method, seed) once: the last made (earlier files first)."""
    latest = {(r["model"], r["workers"], r["method"], r["seed"]): r for r in runs}
    return list(latest.values())


def _report(args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    rng = np.random.default_rng(0)
    table = [
        [
            "model",
            "N",
            "method",
            "seeds",
            "validation acc.",
            "vs 1 worker (points)",
            "test acc.",
            "vs 1 worker (points)",
            "updates",
            "passes over data",
            "billable s",
        ]
    ]
    summaries: list[dict[str, Any]] = []
    goal_met: dict[str, bool] = {}  # "method: model N=n"
    by_method: dict[str, dict[bool, list[str]]] = {}  # the sizes where it is met, and missed
    for model in args.models:
        base = {r["seed"]: r for r in runs if r["model"] == model and r["workers"] == 1}
        for workers in args.sizes:
            for method in METHODS if workers > 1 else ["none"]:
                mine = [
                    r
                    for r in runs
                    if (r["model"], r["workers"], r["method"]) == (model, workers, method)
                ]
                row: dict[str, Any] = {"model": model, "workers": workers, "method": method}
                if not mine:  # a method these runs left out
                    continue
                cells = [model, str(workers), method if workers > 1 else "1 worker", str(len(mine))]
                for key in ("validation_accuracy", "test_accuracy"):
                    mean, interval = gap_points(mine, base, key, rng)
                    row[key], row[f"{key}_gap_points"] = mean, interval
                    cells += [f"{mean:.4f}", interval_text(interval) if workers > 1 else ""]
                row["updates"] = float(np.mean([r["updates"] for r in mine]))
                row["data_epochs"] = float(np.mean([r["data_epochs"] for r in mine]))
                row["billable_seconds"] = float(np.mean([r["billable_seconds"] for r in mine]))
                cells += [
                    f"{row['updates']:.0f}",
                    f"{row['data_epochs']:.2f}",
                    f"{row['billable_seconds']:.0f}",
                ]
                table.append(cells)
                summaries.append(row)
                if method.startswith("adascale"):  # each way of measuring its gain
                    worst = min(
                        row["validation_accuracy_gap_points"]["mean"],
                        row["test_accuracy_gap_points"]["mean"],
                    )
                    goal_met[f"{method}: {model} N={workers}"] = worst >= -0.1
                    verdict = by_method.setdefault(method, {True: [], False: []})
                    verdict[worst >= -0.1].append(f"{model} N={workers}")
    verdicts = "; ".join(
        f"{method}: met at {', '.join(sizes[True]) or 'none'}, missed at "
        f"{', '.join(sizes[False]) or 'none'}"
        for method, sizes in by_method.items()
    )
    notes = f"""
Seeds {", ".join(map(str, args.seeds))} (a row's count of them: its column); one worker's
settings: MLP/CNN, SGD lr 0.05, momentum 0.9, batch 64 a worker; {args.epochs} epochs (MLP),
{args.cnn_epochs} (CNN). N above {args.max_processes}: {args.max_processes} processes, each
accumulating N/{args.max_processes} micro-batches a update. "vs 1 worker": the mean over seeds
of the paired difference in accuracy points (95 % bootstrap interval). Updates and passes over
the data: AdaScale ends when it has made one worker's progress (the sum of its gains), so it
may pass over the data more often; the fixed rules run the epochs they are given.

Goal (AdaScale within 0.1 point of one worker at every N, validation and test, mean over
seeds), for each way of measuring its gain: {verdicts}.
"""
    write(
        args.name,
        "Scale-out with one worker's settings: none, linear scaling, AdaScale (MNIST)",
        {"runs": runs, "summaries": summaries, "goal_met": goal_met},
        table,
        notes,
    )


if __name__ == "__main__":
    main()
