"""scaletune's population-based training against Ray Tune's, on real training (issue 16).

One population of 4 MLPs on MNIST (one CPU worker each, SGD, batch 64, `--epochs` epochs),
its learning rate (0.001 to 0.5, logarithmic) and momentum (0.5 to 0.99, on the scale of its
distance to 1) tuned. Every 2 epochs the bottom quarter goes on from the newest checkpoint of
the top quarter with its settings perturbed (x1.2 or x0.8, or drawn afresh with probability
0.25): the same PBT settings on both tools, the same 4 first members (drawn from the seed),
a checkpoint at the end of every epoch on both. Five arms per seed (`--arms` picks some),
their order rotating:

- scaletune `strategy = "PBT"` (each copy a trial of its own; 16 trials at most);
- the same with `pbt.synchronous = true`: the population ranked together every 2 epochs;
- Ray Tune's `PopulationBasedTraining` with a function trainable that trains the same network
  (scaletune's, the same initial weights) on the same split with the same optimiser and batch
  size, shuffling each epoch (the data put in Ray's object store once); Ray multiplies
  momentum itself by the factor, so a custom explore step keeps it within its range;
- the same with `synch=True`, Ray Tune's synchronous PBT;
- scaletune `strategy = "Random"` with the same 4 first members and no exploitation: what
  PBT adds.

Reported per arm: the best validation accuracy among the members that reached the last epoch
(mean, spread, and paired differences with a bootstrap 95 % interval), the epochs trained in
all, and the wall time of the tuning run (Ray's start, `ray.init`, not counted).

    PYTHONPATH=. .bench-venv/bin/python -m benchmarks.tuning.pbt --seeds 10

Writes benchmarks/results/tuning_pbt.{json,md} (`--name` for another name).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._report import MNIST_FOLDER, paired_interval, write
from scaletune.analysis import analytics_dataframe
from scaletune.api import Session
from scaletune.spec import tuning_spec_from_dict
from scaletune.tuning import TuningController

POPULATION = 4
INTERVAL = 2  # epochs between exploit steps
BATCH = 64
HIDDEN = 128
LEARNING_RATE = (0.001, 0.5)
MOMENTUM = (0.5, 0.99)
TRAIN_ROWS = 55_000  # MNIST's training file less its last 5,000 rows (the validation split)
UPDATES_PER_EPOCH = math.ceil(TRAIN_ROWS / BATCH)
ARMS = (
    "scaletune PBT",
    "scaletune PBT synchronous",
    "Ray Tune PBT",
    "Ray Tune PBT synch",
    "scaletune Random (no PBT)",
)
# Paired differences, where both arms ran: (minuend, subtrahend, label).
DIFFERENCES = (
    ("scaletune PBT", "Ray Tune PBT", "scaletune PBT minus Ray Tune PBT"),
    ("scaletune PBT synchronous", "Ray Tune PBT synch", "synchronous: scaletune minus Ray Tune"),
    ("scaletune PBT synchronous", "scaletune PBT", "scaletune synchronous minus asynchronous"),
    ("scaletune PBT", "scaletune Random (no PBT)", "scaletune PBT minus no PBT"),
)


def first_members(seed: int) -> list[dict[str, float]]:
    """The population's first settings: learning rate log-uniform, momentum log-uniform in its
    distance to 1 (scaletune's ReverseLogarithmic)."""
    rng = np.random.default_rng([seed, 7])
    rate = (math.log(LEARNING_RATE[0]), math.log(LEARNING_RATE[1]))
    distance = (math.log(1 - MOMENTUM[1]), math.log(1 - MOMENTUM[0]))
    return [
        {
            "learning_rate": math.exp(rng.uniform(*rate)),
            "momentum": 1 - math.exp(rng.uniform(*distance)),
        }
        for _ in range(POPULATION)
    ]


def _scaletune(
    session: Session, seed: int, epochs: int, strategy: str, *, synchronous: bool = False
) -> dict[str, Any]:
    pbt = {"perturbation_interval": INTERVAL, "synchronous": synchronous}
    channel = {"dataset": "mnist", "dataset_file": str(MNIST_FOLDER)}
    spec = tuning_spec_from_dict(
        {
            "name": f"pbt-{strategy.lower()}-{seed}",
            "objective_metric": "validation:accuracy",
            "objective_type": "Maximize",
            "strategy": strategy,
            "max_jobs": 4 * POPULATION if strategy == "PBT" else POPULATION,
            "max_parallel_jobs": POPULATION,
            "seed": seed,
            "first_configurations": first_members(seed),
            **({"pbt": pbt} if strategy == "PBT" else {}),
            "ranges": {
                "learning_rate": {
                    "type": "Continuous",
                    "min_value": LEARNING_RATE[0],
                    "max_value": LEARNING_RATE[1],
                    "scaling": "Logarithmic",
                },
                "momentum": {
                    "type": "Continuous",
                    "min_value": MOMENTUM[0],
                    "max_value": MOMENTUM[1],
                    "scaling": "ReverseLogarithmic",
                },
            },
            "training": {
                "name": "pbt-mnist",
                "algorithm": "dnn",
                "instance_count": 1,
                "seed": seed,
                "hyperparameters": {
                    "model": "mlp",
                    "hidden_units": HIDDEN,
                    "epochs": epochs,
                    "batch_size": BATCH,
                    "optimizer": "sgd",
                },
                "checkpoint": {"every_steps": UPDATES_PER_EPOCH},
                "channels": {"train": channel, "validation": channel},
            },
        }
    )
    controller = TuningController(session.controller)
    started = time.perf_counter()
    tuning_id = controller.create(spec)
    controller.run(tuning_id, spec)
    wall = time.perf_counter() - started
    trials = analytics_dataframe(session.store, tuning_id)
    finished = trials[trials["ResourceReached"] == epochs]
    # A copy trains from its parent's checkpoint (a step: an update) to its own last epoch.
    inherited = trials["ParentCheckpointStep"].fillna(0) / UPDATES_PER_EPOCH
    return {
        "seed": seed,
        "best_accuracy": float(finished["FinalObjectiveValue"].max()),
        "epochs_trained": float((trials["ResourceReached"].fillna(0) - inherited).sum()),
        "trials": len(trials),
        "wall_seconds": wall,
    }


def _ray_member(config: dict[str, Any], data: dict[str, np.ndarray]) -> None:
    """One member, trained as scaletune's DNN trains it with one worker."""
    import torch
    import torch.nn.functional as functional
    from ray import tune

    from scaletune.algorithms.dnn._hyperparameters import Architecture
    from scaletune.algorithms.dnn._model import ModelConfig, build_model

    # Ray hands out the object store's arrays read-only; torch wants writable ones.
    data = {name: np.array(array) for name, array in data.items()}
    features, labels = torch.from_numpy(data["train_x"]), torch.from_numpy(data["train_y"])
    valid_x, valid_y = torch.from_numpy(data["valid_x"]), torch.from_numpy(data["valid_y"])
    model = build_model(
        ModelConfig(Architecture.MLP, features.shape[1], 10, HIDDEN), config["seed"]
    )
    optimizer = torch.optim.SGD(
        model.parameters(), lr=config["learning_rate"], momentum=config["momentum"]
    )
    epoch = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:  # a copy: the donor's weights and optimiser state, its own settings
        with checkpoint.as_directory() as folder:
            state = torch.load(Path(folder) / "state.pt", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        for group in optimizer.param_groups:
            group.update(lr=config["learning_rate"], momentum=config["momentum"])
        epoch = state["epoch"]
    while epoch < config["epochs"]:
        epoch += 1
        # The order is a function of (seed, epoch), as scaletune's is: a copy that takes a
        # donor's checkpoint at epoch k goes on with epoch k + 1's order, not epoch 1's.
        generator = torch.Generator().manual_seed(config["seed"] * 1_000_003 + epoch)
        order = torch.randperm(len(labels), generator=generator)
        for start in range(0, len(labels), BATCH):
            rows = order[start : start + BATCH]
            loss = functional.cross_entropy(model(features[rows]), labels[rows])
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
        with torch.no_grad():
            accuracy = float((model(valid_x).argmax(dim=1) == valid_y).float().mean())
        with tempfile.TemporaryDirectory() as folder:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
            torch.save({**state, "epoch": epoch}, Path(folder) / "state.pt")
            tune.report(
                {"accuracy": accuracy, "epoch": epoch},
                checkpoint=tune.Checkpoint.from_directory(folder),
            )


def _within_ranges(config: dict[str, Any]) -> dict[str, Any]:
    """Ray multiplies a value by the factor as it is: keep it within its range."""
    for name, (low, high) in (("learning_rate", LEARNING_RATE), ("momentum", MOMENTUM)):
        config[name] = min(max(config[name], low), high)
    return config


def _resample_momentum() -> float:
    low, high = math.log(1 - MOMENTUM[1]), math.log(1 - MOMENTUM[0])
    return 1 - math.exp(random.uniform(low, high))


def _report_count() -> Any:
    """A Ray Tune callback that counts every trial's reports: one epoch trained each, a
    copy's included (a trial's own results restart where it takes the donor's checkpoint)."""
    from ray import tune

    class ReportCount(tune.Callback):  # type: ignore[misc]  # Ray: not in .venv
        count = 0

        def on_trial_result(self, *args: Any, **kwargs: Any) -> None:
            self.count += 1

    return ReportCount()


def _ray(
    data_ref: Any, storage: Path, seed: int, epochs: int, *, synch: bool = False
) -> dict[str, Any]:
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining
    from ray.tune.search.basic_variant import BasicVariantGenerator

    reports = _report_count()
    random.seed(seed)  # Ray's PBT draws its perturbations from Python's generator
    scheduler = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=INTERVAL,
        hyperparam_mutations={
            "learning_rate": tune.loguniform(*LEARNING_RATE),
            "momentum": _resample_momentum,
        },
        quantile_fraction=0.25,
        resample_probability=0.25,
        custom_explore_fn=_within_ranges,
        synch=synch,
    )
    tuner = tune.Tuner(
        tune.with_resources(tune.with_parameters(_ray_member, data=data_ref), {"cpu": 1}),
        param_space={
            "learning_rate": tune.loguniform(*LEARNING_RATE),
            "momentum": tune.uniform(*MOMENTUM),  # unused: the first members are given
            "seed": seed,
            "epochs": epochs,
        },
        tune_config=tune.TuneConfig(
            metric="accuracy",
            mode="max",
            scheduler=scheduler,
            num_samples=POPULATION,
            search_alg=BasicVariantGenerator(points_to_evaluate=first_members(seed)),
        ),
        run_config=tune.RunConfig(
            storage_path=str(storage),
            name=f"pbt-{uuid.uuid4().hex[:8]}",
            verbose=0,
            callbacks=[reports],
        ),
    )
    started = time.perf_counter()
    results = tuner.fit()
    wall = time.perf_counter() - started
    if results.errors:
        raise RuntimeError(f"Ray Tune PBT, seed {seed}: {results.errors}")
    finals = [r.metrics["accuracy"] for r in results if r.metrics.get("epoch") == epochs]
    return {
        "seed": seed,
        "best_accuracy": float(max(finals)),
        "epochs_trained": float(reports.count),
        "trials": len(results),
        "wall_seconds": wall,
    }


def _mnist_arrays() -> dict[str, np.ndarray]:
    from scaletune.data import prepare_mnist

    tables = prepare_mnist(MNIST_FOLDER)
    return {
        "train_x": np.ascontiguousarray(tables["train"].features, dtype=np.float32),
        "train_y": np.asarray(tables["train"].labels, dtype=np.int64),
        "valid_x": np.ascontiguousarray(tables["validation"].features, dtype=np.float32),
        "valid_y": np.asarray(tables["validation"].labels, dtype=np.int64),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--name", default="tuning_pbt")
    args = parser.parse_args()
    if args.seeds < 2 or args.epochs <= INTERVAL:
        parser.error(
            f"--seeds {args.seeds} --epochs {args.epochs}: need 2+ and more than {INTERVAL}"
        )
    import ray

    arms = [arm for arm in ARMS if arm in args.arms]
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        session.backend.prestart(POPULATION)
        ray.init(num_cpus=POPULATION, include_dashboard=False, log_to_driver=False)
        try:
            data_ref = ray.put(_mnist_arrays())
            for seed in range(args.seeds):
                for turn in range(len(arms)):
                    arm = arms[(seed + turn) % len(arms)]
                    synchronous = "synch" in arm
                    if arm.startswith("Ray Tune"):
                        run = _ray(
                            data_ref, Path(scratch) / "ray", seed, args.epochs, synch=synchronous
                        )
                    else:
                        strategy = "Random" if "Random" in arm else "PBT"
                        run = _scaletune(
                            session, seed, args.epochs, strategy, synchronous=synchronous
                        )
                    runs[arm].append(run)
                    print(arm, run, flush=True)
        finally:
            ray.shutdown()
    _write(runs, args)


def _write(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    accuracy = {
        arm: np.array([r["best_accuracy"] for r in results]) for arm, results in runs.items()
    }
    rng = np.random.default_rng(0)
    differences = {
        label: paired_interval(accuracy[first] - accuracy[second], rng)
        for first, second, label in DIFFERENCES
        if first in runs and second in runs
    }
    rows = [
        [
            "arm",
            "best validation accuracy: mean (sd)",
            "min / max",
            "epochs trained: mean",
            "trials: mean",
            "wall s: median",
        ]
    ]
    for arm in runs:
        values = accuracy[arm]
        rows.append(
            [
                arm,
                f"{values.mean():.4f} ({values.std(ddof=1):.4f})",
                f"{values.min():.4f} / {values.max():.4f}",
                f"{statistics.fmean(r['epochs_trained'] for r in runs[arm]):.1f}",
                f"{statistics.fmean(r['trials'] for r in runs[arm]):.1f}",
                f"{statistics.median(r['wall_seconds'] for r in runs[arm]):.0f}",
            ]
        )
    lines = "\n".join(
        f"{name}: {d['mean']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]"
        for name, d in differences.items()
    )
    write(
        args.name,
        "Population-based training on real training: scaletune against Ray Tune",
        {"settings": vars(args), "differences": differences, "runs": runs},
        rows,
        f"""
Seeds 0..{args.seeds - 1}, the arms' order rotating seed by seed. Paired by seed (mean
[bootstrap 95 % interval]; synchronous: the population ranked together at each interval,
a member that gets there first waiting for the rest):
{lines}

A population of {POPULATION} MLPs ({HIDDEN} hidden units) on MNIST, {args.epochs} epochs, SGD,
batch {BATCH}, one CPU worker a member, all {POPULATION} at once on the machine's cores;
every {INTERVAL} epochs the bottom quarter goes on from the top quarter's newest checkpoint
(taken at every epoch's end) with its settings perturbed (x1.2 / x0.8, or drawn afresh with
probability 0.25). Best validation accuracy: among the members that reached the last epoch.
Epochs trained: in all, a copy counted from the epoch it inherits. Wall: the tuning run,
Ray's start (`ray.init`) not counted.
""",
        environment=".bench-venv",
    )


if __name__ == "__main__":
    main()
