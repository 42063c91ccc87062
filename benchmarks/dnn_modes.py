"""The reference's DNN table on MNIST: 1 worker vs 4 workers in every synchronisation mode.

Per-worker batch is kept, so 4 workers train at 4x the global batch (and, synchronously, take
4x fewer steps per epoch). Every case starts from the same naive hyperparameters (tuned for
one worker) and runs a fixed number of epochs; then the large-batch remedy (linear lr scaling
with warm-up) and the conditions under which asynchronous training degrades (learning rate,
momentum, worker count, a staleness bound). One run per case, seed 0.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._report import MNIST_FOLDER, write
from scaletune.api import Estimator, Session

NAIVE: dict[str, Any] = {
    "model": "mlp",
    "hidden_units": 128,
    "batch_size": 64,
    "learning_rate": 0.05,
    "optimizer": "sgd",
    "momentum": 0.9,
}
ALLREDUCE = {"strategy": "allreduce"}
PS_SYNC = {"strategy": "parameter_server", "mode": "sync"}
PS_ASYNC = {"strategy": "parameter_server", "mode": "async"}


@dataclass(frozen=True)
class Case:
    group: str
    label: str
    workers: int
    distribution: dict[str, Any]
    changes: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("table", "all-reduce", 1, ALLREDUCE),
    Case("table", "all-reduce", 4, ALLREDUCE),
    Case("table", "parameter server, sync", 1, PS_SYNC),
    Case("table", "parameter server, sync", 4, PS_SYNC),
    Case("table", "parameter server, async", 1, PS_ASYNC),
    Case("table", "parameter server, async", 4, PS_ASYNC),
    Case(
        "remedy",
        "all-reduce, lr x4 (linear), 1 warm-up epoch",
        4,
        ALLREDUCE,
        {"lr_scaling": "linear", "warmup_epochs": 1},
    ),
    Case(
        "remedy",
        "all-reduce, lr x2 (sqrt), 1 warm-up epoch",
        4,
        ALLREDUCE,
        {"lr_scaling": "sqrt", "warmup_epochs": 1},
    ),
    Case("async", "async, lr 0.2", 4, PS_ASYNC, {"learning_rate": 0.2}),
    Case("async", "async, momentum 0.99", 4, PS_ASYNC, {"momentum": 0.99}),
    Case("async", "async, 8 workers", 8, PS_ASYNC),
    Case(
        "async",
        "async, lr x4 (linear scaling applied to async)",
        4,
        PS_ASYNC,
        {"lr_scaling": "linear"},
    ),
    Case(
        "async",
        "async, lr x4, staleness_bound=0",
        4,
        {**PS_ASYNC, "staleness_bound": 0},
        {"lr_scaling": "linear"},
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--data", type=Path, default=MNIST_FOLDER)
    parser.add_argument("--groups", nargs="+", default=["table", "remedy", "async"])
    args = parser.parse_args()
    channel = {"dataset": "mnist", "dataset_file": str(args.data)}
    rows = [["case", "workers", "validation accuracy", "test accuracy", "wall (s)", "notes"]]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        for case in (case for case in CASES if case.group in args.groups):
            hyperparameters = {**NAIVE, "epochs": args.epochs, **case.changes}
            job = Estimator(
                "dnn",
                hyperparameters,
                instance_count=case.workers,
                distribution=case.distribution,
                session=session,
            ).fit({"train": channel, "validation": channel, "test": channel})
            record = job.describe()
            metrics = record.final_metrics
            curve = job.metrics("validation:accuracy")
            results.append(
                {
                    "group": case.group,
                    "case": case.label,
                    "workers": case.workers,
                    "distribution": case.distribution,
                    "hyperparameters": hyperparameters,
                    "status": record.status.value,
                    "wall_seconds": record.wall_seconds,
                    "final_metrics": metrics,
                    "validation_accuracy_by_epoch": [float(v) for v in curve["value"]],
                }
            )
            notes = []
            if "ps:staleness_mean" in metrics:
                notes.append(
                    f"staleness mean {metrics['ps:staleness_mean']:.1f}, "
                    f"max {metrics['ps:staleness_max']:.0f}"
                )
            if "gns:b_simple" in metrics:
                notes.append(f"B_simple ≈ {metrics['gns:b_simple']:.0f}")
            rows.append(
                [
                    case.label,
                    str(case.workers),
                    f"{metrics.get('validation:accuracy', float('nan')):.4f}",
                    f"{metrics.get('test:accuracy', float('nan')):.4f}",
                    f"{record.wall_seconds:.1f}",
                    "; ".join(notes) or record.status.value,
                ]
            )
            print(rows[-1], flush=True)
    write(
        "dnn_modes",
        f"Data-parallel MNIST classifier: 1 vs 4 workers, {args.epochs} epochs",
        {"epochs": args.epochs, "naive_hyperparameters": NAIVE, "cases": results},
        rows,
        NOTES,
    )


NOTES = """
Naive hyperparameters (tuned for one worker): MLP 784-128-10, SGD lr 0.05, momentum 0.9, batch
64 per worker. Wall time includes starting the workers (cold) and loading MNIST; this machine has
2 cores, so 4 workers share them and are not faster than one.
"""


if __name__ == "__main__":
    main()
