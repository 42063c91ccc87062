"""scaletune's all-reduce training loop vs a plain PyTorch DDP script, same model and data.

MNIST (55,000 training images) sharded over the workers, the naive MLP of dnn_modes, batch 64
per worker, SGD with momentum, validation accuracy on rank 0 after every epoch in both. A run's
epoch time is the median time between the ends of successive epochs on rank 0 (start-up and
the first epoch are left out of both). Runs alternate; the ratio is of the medians over runs.
scaletune does more: it samples the gradient noise scale (every 16th step it all-reduces the
gradients itself, to see their norm before and after), and every 20 steps its ranks agree on
whether to stop.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from benchmarks._baseline import save_splits
from benchmarks._plain_ddp import run_plain
from benchmarks._report import MNIST_FOLDER, Paired, spread, write
from scaletune.api import Estimator, Session
from scaletune.cluster import free_port
from scaletune.data import prepare_mnist

SETTINGS = {
    "hidden_units": 128,
    "batch_size": 64,
    "learning_rate": 0.05,
    "momentum": 0.9,
    "seed": 0,
}


def _epoch_seconds(times: list[float]) -> float:
    return float(np.median(np.diff(times)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data", type=Path, default=MNIST_FOLDER)
    args = parser.parse_args()
    splits = prepare_mnist(args.data)
    settings = {**SETTINGS, "epochs": args.epochs}
    plain_epochs, ours_epochs, plain_accuracy, ours_accuracy = [], [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch)
        save_splits(splits, data)
        channel = {"dataset": "mnist", "dataset_file": str(args.data)}
        with Session(data / "store.db") as session:
            for _ in range(args.repeats):
                times, accuracy = run_plain(data, settings, args.workers, free_port())
                plain_epochs.append(_epoch_seconds(times))
                plain_accuracy.append(accuracy)
                job = Estimator(
                    "dnn",
                    {**settings, "model": "mlp"},
                    instance_count=args.workers,
                    session=session,
                ).fit({"train": channel, "validation": channel})
                curve = job.metrics("validation:accuracy")
                ours_epochs.append(_epoch_seconds([t.timestamp() for t in curve["time"]]))
                ours_accuracy.append(float(curve["value"].iloc[-1]))
    compared = Paired.of(plain_epochs, ours_epochs)
    write(
        "dnn_overhead",
        f"scaletune vs plain PyTorch DDP: {args.workers}-worker epoch time on MNIST",
        {
            "epoch_seconds": {"plain": plain_epochs, "scaletune": ours_epochs},
            **compared.results(),
            "validation_accuracy": {"plain": plain_accuracy, "scaletune": ours_accuracy},
        },
        [
            ["runner", "s per epoch: median (min–max)", "final validation accuracy", "ratio"],
            ["plain DDP script", spread(compared.plain), f"{plain_accuracy[0]:.4f}", "1.00"],
            [
                f"scaletune train ({args.workers} workers)",
                spread(compared.ours),
                f"{ours_accuracy[0]:.4f}",
                f"{compared.ratio:.3f}",
            ],
            compared.pairs_row(4),
        ],
        f"""
{args.repeats} runs each, alternating; {args.epochs} epochs a run, {args.workers} workers on
this machine's cores (threads shared out equally in both). Both start from the same weights
and walk the same shards in the same seeded order, so equal final accuracies show they train
the same model. scaletune's extra work: every 16th step it averages the gradients itself to
sample the gradient noise scale, and every 20th the ranks agree on whether to stop.
""",
    )


if __name__ == "__main__":
    main()
