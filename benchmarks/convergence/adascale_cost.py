"""What measuring the gradient noise costs a training update: 2-worker all-reduce on MNIST
(the experiment's MLP), never measured, measured every 16th update (the noise scale's
default), AdaScale's gain estimated on every update, and on every 4th (its default) and 8th
from every update measured since (pooled), in rotating order.

A run's time per update is taken between its first and last epoch reports on rank 0 (start-up
and the first epoch left out), over the updates made in between: AdaScale's epochs are one
worker's progress and take more updates than a pass over the data, so epochs are not compared.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._report import MNIST_FOLDER, ratio_interval, spread, summary, write
from scaletune.algorithms.dnn._batches import batches_per_epoch
from scaletune.api import Estimator, Session
from scaletune.data import prepare_mnist
from scaletune.experiment._plans import DNN_NAIVE

ARMS: dict[str, dict[str, Any]] = {
    "never": {"gns_every_updates": 0},
    "every 16th update (noise scale)": {"gns_every_updates": 16},
    "adascale, gain every update": {"lr_scaling": "adascale", "adascale_every_updates": 1},
    "adascale, gain pooled over 4 updates (default)": {"lr_scaling": "adascale"},
    "adascale, gain pooled over 8 updates": {"lr_scaling": "adascale", "adascale_every_updates": 8},
}


def _seconds_per_update(job: Any, updates_per_epoch: int) -> float:
    points = job.metrics("validation:accuracy")
    times, steps = list(points["time"]), list(points["step"])
    counted = job.metrics("train:updates")  # AdaScale's; a fixed pace's from its epochs
    done = list(counted["value"]) if len(counted) else [s * updates_per_epoch for s in steps]
    elapsed = (times[-1] - times[0]).total_seconds()  # pandas timestamps
    return float(elapsed / (done[-1] - done[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data", type=Path, default=MNIST_FOLDER)
    args = parser.parse_args()
    channel = {"dataset": "mnist", "dataset_file": str(args.data)}
    rows = prepare_mnist(args.data)["train"].n_rows
    updates_per_epoch = batches_per_epoch(rows, args.workers, DNN_NAIVE["batch_size"])
    names = list(ARMS)
    times: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        for round_number in range(args.rounds):
            order = names[round_number % len(names) :] + names[: round_number % len(names)]
            for name in order:
                hyperparameters = {**DNN_NAIVE, "epochs": args.epochs, "seed": 0, **ARMS[name]}
                job = Estimator(
                    "dnn", hyperparameters, instance_count=args.workers, session=session
                ).fit({"train": channel, "validation": channel})
                times[name].append(_seconds_per_update(job, updates_per_epoch))
                print(name, f"{times[name][-1] * 1000:.2f} ms", flush=True)
    table = [["measured", "ms an update (median, min–max)", "÷ never, within rounds"]]
    results: dict[str, Any] = {"seconds_per_update": times}
    for name in names:
        stats = summary(times[name])
        cell = "" if name == "never" else _ratio(times["never"], times[name])
        table.append(
            [
                name,
                spread(stats, scale=1000),
                cell,
            ]
        )
        if name != "never":
            results[f"ratio {name}"] = ratio_interval(times["never"], times[name])
    notes = f"""
{args.workers} workers (gloo, 2 cores), MNIST MLP 784-128-10, batch 64 a worker, {args.epochs}
epochs, {args.rounds} rounds in rotating order. A measurement, at one micro-batch a worker as
here: DDP's communication hook takes each bucket's squared norm before its all-reduce, the last
bucket carries their sum in one more element (no collective of its own), and one more squared
norm is taken of the averaged gradient (with several micro-batches a worker, hooks on the
parameters add each micro-batch's, and one all-reduce of one number sums them). Pooled,
every update's squared norms are taken and only every 4th or 8th update's last bucket carries
their sum since the last estimate; the updates between take the last gain. The ratio is the
geometric mean of the ratios within rounds, with a 95 % BCa bootstrap interval.
"""
    write(
        "convergence_adascale_cost",
        "What measuring the gradient noise costs an update (2-worker all-reduce, MNIST)",
        results,
        table,
        notes,
    )


def _ratio(never: list[float], measured: list[float]) -> str:
    interval = ratio_interval(never, measured)
    return f"{interval['ratio']:.3f} ({interval['low']:.3f}–{interval['high']:.3f})"


if __name__ == "__main__":
    main()
