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
# The reference's asynchronous server: the momentum asked for kept (scaletune's default takes
# off what asynchrony adds; benchmarks/convergence/async_staleness.py measures the remedies).
PS_ASYNC = {"strategy": "parameter_server", "mode": "async", "implicit_momentum": "ignore"}


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
        "async, lr x4, max_staleness=1",
        4,
        {**PS_ASYNC, "max_staleness": 1},
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
64 per worker, 5 epochs. Wall time includes starting the workers (cold) and loading MNIST.

What it shows, run on 2 cores:

- **All-reduce and the synchronous parameter server make the same updates**: their 4-worker
  rows agree to every digit. At 4x the global batch they take 4x fewer steps in the same
  epochs and lose ~0.8 points of validation accuracy, not the reference's collapse.
- **The large-batch remedy closes that gap**: linear scaling (lr x4) with one warm-up epoch
  reaches 0.32 points below one worker on validation and matches it on test; sqrt scaling
  0.44 points below.
- **The asynchronous parameter server is where training collapses.** These rows are the
  reference's server (the momentum asked for kept) and single runs, which swing with how the
  pushes interleave on 2 cores: with the naive settings each gradient is ~3 updates stale
  (mean) and 4 workers reached 0.61 here (0.71 and 0.96 in earlier runs;
  `convergence_async_staleness.md` has seeds). A larger learning rate (0.2, or the "linear"
  x4 that is right for synchronous training), or momentum 0.99, send it to chance
  (0.10-0.21): the reference's 0.97 -> 0.11 is reproduced by staleness compounding with
  momentum, not by data parallelism as such. `max_staleness = 1` cuts the largest staleness
  (7 against 20) but does not rescue lr x4 (0.11): the momentum buffer on the server still
  accumulates stale gradients four times per worker step.
- 8 async workers at the naive settings reached 0.31 (staleness mean 7). Earlier runs
  reached 0.90 and 0.93 with a staleness mean under 3 in the last epoch: the job then ended
  when every worker had passed over its shard, so its last epoch ran with the finished
  workers gone, a cool-down; the server now ends it when the data's passes are applied,
  all workers pushing to the end. scaletune's default remedy (the momentum asynchrony adds
  taken off) is measured in `convergence_async_staleness.md` and
  `convergence_stragglers.md`.
- Speed: 4 processes share 2 cores, so no case is faster than one worker. The synchronous
  parameter server's 4-worker run was faster than DDP's (gloo's all-reduce among 4 processes
  on 2 cores costs more than one round trip to a server thread).
"""


if __name__ == "__main__":
    main()
