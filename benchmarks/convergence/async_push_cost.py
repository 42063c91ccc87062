"""What the asynchronous server's remedies cost a push, and an asynchronous job.

1. The server's own work per push (`ServerUpdates.apply_push`, the server applying pushes one
   at a time): the MNIST MLP at 2, 16, 128 and 1,024 hidden units (1.6k to 814k weights),
   real gradients of real MNIST batches of 64 pushed by 4 simulated workers in turn (the
   gradient's own computation is not timed), the former default (the momentum correction
   alone) against the default (delay compensation and the adapted step), the two arms
   alternating in blocks of `--block` pushes on one core; each arm's median microseconds a
   push over its blocks, early (the first 1,000 pushes) and late (after 2,000: where a mean
   square that decays in place reaches denormal floats).
2. Whole jobs: 4 MNIST workers, `--epochs` epochs, the two remedies alternating `--runs`
   times each; the ratio of the medians of their wall times.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from benchmarks._report import MNIST_FOLDER, write
from benchmarks.convergence.async_simulated import batch_gradient
from scaletune.algorithms.dnn._pace import FixedPace
from scaletune.algorithms.dnn._ps_updates import Pushed, ServerUpdates
from scaletune.algorithms.dnn._schedule import LearningRateSchedule
from scaletune.algorithms.dnn._staleness import AsyncRemedies
from scaletune.api import Estimator, Session
from scaletune.data import prepare_mnist
from scaletune.spec import DistributionSpec

ARMS: dict[str, dict[str, str]] = {
    "former default (subtract, none)": {
        "implicit_momentum": "subtract",
        "staleness_compensation": "none",
    },
    "default (adapt, auto: dc)": {},
}
WORKERS, LEARNING_RATE, MOMENTUM, BATCH = 4, 0.05, 0.9, 64


def _server(settings: dict[str, str], hidden: int) -> tuple[ServerUpdates, nn.Module]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    spec = DistributionSpec.model_validate(
        {"strategy": "parameter_server", "mode": "async", **settings}
    )
    remedies = AsyncRemedies.of(spec, MOMENTUM, WORKERS)
    pace = FixedPace(LearningRateSchedule(LEARNING_RATE, LEARNING_RATE, 0), epochs=10**6)
    updates = ServerUpdates(model, optimizer, pace, remedies=remedies)
    return updates, model


def server_cost(
    features: torch.Tensor, labels: torch.Tensor, hidden: int, pushes: int, block: int
) -> dict[str, dict[str, float]]:
    """Each arm's median microseconds a push, early and late, alternating blocks."""
    servers = {name: _server(settings, hidden) for name, settings in ARMS.items()}
    pulled: dict[str, list[tuple[np.ndarray, int]]] = {}
    for name, (_, model) in servers.items():
        start = parameters_to_vector(model.parameters()).detach().numpy().copy()
        pulled[name] = [(start, 0)] * WORKERS
    rng = np.random.default_rng(hidden)
    batches = [rng.choice(len(labels), BATCH, replace=False) for _ in range(pushes)]
    worker = copy.deepcopy(next(iter(servers.values()))[1])  # computes the pushes, untimed
    times: dict[str, list[tuple[int, float]]] = {name: [] for name in ARMS}
    for first in range(0, pushes, block):
        for name, (updates, model) in servers.items():
            elapsed = 0.0
            for index in range(first, min(first + block, pushes)):
                rank = index % WORKERS
                weights, version = pulled[name][rank]
                vector_to_parameters(torch.from_numpy(weights), worker.parameters())
                computed = batch_gradient(worker, (features, labels), batches[index])
                push = Pushed(
                    computed.gradient,
                    staleness=updates.version - version,
                    pulled=weights if updates.keeps_pulled_weights else None,
                    loss_sum=computed.loss_sum,
                    examples=computed.examples,
                )
                began = time.perf_counter()
                updates.apply_push(push)
                elapsed += time.perf_counter() - began
                now = parameters_to_vector(model.parameters()).detach().numpy().copy()
                pulled[name][rank] = (now, updates.version)
            times[name].append((first, 1e6 * elapsed / block))
    return {
        name: {
            "early_us": statistics.median(t for first, t in blocks if first < 1000),
            "late_us": statistics.median(t for first, t in blocks if first >= 2000),
        }
        for name, blocks in times.items()
    }


def job_times(folder: Path, epochs: int, runs: int) -> dict[str, list[float]]:
    channel = {"dataset": "mnist", "dataset_file": str(folder)}
    walls: dict[str, list[float]] = {name: [] for name in ARMS}
    hyperparameters = {
        "model": "mlp",
        "hidden_units": 128,
        "batch_size": BATCH,
        "epochs": epochs,
        "learning_rate": LEARNING_RATE,
        "momentum": MOMENTUM,
    }
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        for run in range(runs):
            for name, settings in ARMS.items():
                record = (
                    Estimator(
                        "dnn",
                        {**hyperparameters, "seed": run},
                        instance_count=WORKERS,
                        distribution={"strategy": "parameter_server", "mode": "async", **settings},
                        session=session,
                    )
                    .fit({"train": channel, "validation": channel, "test": channel})
                    .describe()
                )
                assert record.wall_seconds is not None
                walls[name].append(record.wall_seconds)
                print(name, run, record.wall_seconds, flush=True)
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hidden", nargs="+", type=int, default=[2, 16, 128, 1024])
    parser.add_argument("--pushes", type=int, default=4000)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", type=Path, default=MNIST_FOLDER)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tables = prepare_mnist(args.data)
    features = torch.from_numpy(tables["train"].features)
    labels = torch.from_numpy(tables["train"].labels).long()
    former, default = ARMS
    rows = [["weights", "arm", "µs a push, first 1,000", "µs a push, after 2,000", "late ÷ former"]]
    costs: list[dict[str, Any]] = []
    for hidden in args.hidden:
        weights = 784 * hidden + hidden + hidden * 10 + 10
        cost = server_cost(features, labels, hidden, args.pushes, args.block)
        costs.append({"hidden_units": hidden, "weights": weights, **cost})
        for name in ARMS:
            ratio = cost[name]["late_us"] / cost[former]["late_us"]
            rows.append(
                [
                    f"{weights:,}",
                    name,
                    f"{cost[name]['early_us']:.0f}",
                    f"{cost[name]['late_us']:.0f}",
                    f"{ratio:.2f}",
                ]
            )
        print(costs[-1], flush=True)
    walls = job_times(args.data, args.epochs, args.runs)
    medians = {name: statistics.median(times) for name, times in walls.items()}
    write(
        "convergence_async_push_cost",
        "What the asynchronous server's remedies cost a push and a job",
        {"costs": costs, "job_wall_seconds": walls},
        rows,
        f"""
The server's work a push, as above (one core, the two arms alternating in blocks of
{args.block} pushes). Whole jobs: 4 MNIST workers, hidden 128, {args.epochs} epochs, {args.runs}
runs each alternating: median wall time {medians[former]:.1f} s with the former default,
{medians[default]:.1f} s with the default, **{medians[default] / medians[former]:.2f}×**.
""",
    )


if __name__ == "__main__":
    main()
