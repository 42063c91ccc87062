"""Controller overhead per trial decision, and scheduler throughput, side by side in one run.

- throughput: decisions per second of each tool's early-stopping scheduler alone, fed the same
  stream of reports by one event loop (4 trials at a time, 27 epochs each at most);
- controller: real seconds per report of a whole tuning job whose training costs nothing
  (curves given up front): scaletune's tuning loop on the simulated backend with every report
  written to its SQLite store; Optuna's ask / report / should_prune / tell, in memory and on
  SQLite; Ray Tune's Tuner with ASHA and a function trainable that only reports.

    .bench-venv/bin/python -m benchmarks.overhead.decisions [--repeats 3]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._report import summary, write
from benchmarks.tuning._controls import HyperbandPolicy
from benchmarks.tuning._simulator import run_policy
from scaletune.simulation import Curve, CurvePoint, simulate_tuning
from scaletune.spec import TuningJobSpec, tuning_spec_from_dict
from scaletune.store import Store

EPOCHS = 27
WORKERS = 4
METRIC = "val_accuracy"


def _value(x: float, epoch: int) -> float:
    """A cheap learning curve: a ceiling set by x, approached epoch by epoch."""
    return (1 - (x - 0.3) ** 2) * (1 - math.exp(-epoch / 5))


class _Synthetic:
    """Curves known up front (1 s an epoch): the measure is the tool, not the training."""

    def __init__(self, budget_seconds: float) -> None:
        self.budget_seconds = budget_seconds

    def curve(self, config: Mapping[str, object], instance_count: int = 1) -> Curve:
        x = float(config["x"])  # type: ignore[arg-type]
        return Curve(
            [
                CurvePoint(epoch, float(epoch), {METRIC: _value(x, epoch)})
                for epoch in range(1, EPOCHS + 1)
            ],
            full_resource=EPOCHS,
        )


def _draw_x(rng: np.random.Generator) -> dict[str, object]:
    return {"x": float(rng.uniform())}


def _peer_policies(seed: int) -> dict[str, Callable[[], Any]]:
    from benchmarks.tuning import _peers

    def x_only(policy: Any) -> Any:
        # The peers draw LCBench's space; here a trial's curve depends on one number in [0, 1].
        original = policy.suggest

        def suggest() -> tuple[int, dict[str, object]]:
            number, config = original()
            return number, {"x": float(config["momentum"]) / 0.99}

        policy.suggest = suggest
        return policy

    return {
        "scaletune HyperbandScheduler": lambda: HyperbandPolicy(
            seed, max_resource=EPOCHS, draw=_draw_x
        ),
        "Optuna HyperbandPruner (in memory)": lambda: x_only(_peers.OptunaPolicy(seed)),
        "Ray Tune ASHA": lambda: x_only(_peers.RayPolicy(seed, brackets=1)),
        "Syne Tune ASHA": lambda: x_only(_peers.SynePolicy(seed, "ASHA")),
    }


def throughput(seed: int, budget: float) -> dict[str, float]:
    """Decisions per second of each scheduler, through the same event loop."""
    task = _Synthetic(budget)
    rates = {}
    for name, make in _peer_policies(seed).items():
        policy = make()
        started = time.perf_counter()
        reports = run_policy(policy, task, WORKERS)  # type: ignore[arg-type]
        rates[name] = len(reports) / (time.perf_counter() - started)
    return rates


def _scaletune_spec(budget: float, seed: int) -> TuningJobSpec:
    return tuning_spec_from_dict(
        {
            "objective_metric": METRIC,
            "strategy": "Hyperband",
            "hyperband": {"max_resource": EPOCHS},
            "ranges": {"x": {"type": "Continuous", "min_value": 0, "max_value": 1}},
            "max_jobs": 10_000,  # the budget is time
            "max_parallel_jobs": WORKERS,
            "max_runtime_seconds": budget,
            "seed": seed,
            "training": {"algorithm": "script", "script": {"entry_point": "synthetic"}},
        }
    )


def scaletune_controller(seed: int, budget: float, folder: Path) -> float:
    with Store(f"sqlite:///{folder / f'store-{seed}-{time.monotonic_ns()}.db'}") as store:
        started = time.perf_counter()
        record = simulate_tuning(_scaletune_spec(budget, seed), _Synthetic(budget), store)
        elapsed = time.perf_counter() - started
        reports = sum(
            len(store.metrics(trial.id, METRIC)) for trial in store.training_jobs_of(record.id)
        )
    return elapsed / reports


def optuna_controller(seed: int, trials: int, storage: str | None) -> float:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="maximize",
        storage=storage,
        sampler=optuna.samplers.RandomSampler(seed=seed),
        pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=EPOCHS),
    )
    reports = 0
    started = time.perf_counter()
    for _ in range(trials):
        trial = study.ask()
        x = trial.suggest_float("x", 0.0, 1.0)
        for epoch in range(1, EPOCHS + 1):
            value = _value(x, epoch)
            trial.report(value, epoch)
            reports += 1
            if trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                break
        else:
            study.tell(trial, value)
    return (time.perf_counter() - started) / reports


def _ray_trainable(config: dict[str, Any]) -> None:
    from ray import tune

    for epoch in range(1, EPOCHS + 1):
        tune.report({METRIC: _value(config["x"], epoch), "epoch": epoch})


def ray_controller(seed: int, trials: int, storage: Path) -> float:
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    np.random.seed(seed)
    tuner = tune.Tuner(
        _ray_trainable,
        param_space={"x": tune.uniform(0.0, 1.0)},
        tune_config=tune.TuneConfig(
            metric=METRIC,
            mode="max",
            scheduler=ASHAScheduler(time_attr="epoch", max_t=EPOCHS, grace_period=1),
            num_samples=trials,
            max_concurrent_trials=WORKERS,
        ),
        run_config=tune.RunConfig(storage_path=str(storage), name=f"decisions-{seed}"),
    )
    started = time.perf_counter()
    results = tuner.fit()
    elapsed = time.perf_counter() - started
    reports = sum(len(result.metrics_dataframe) for result in results)
    return elapsed / reports


def controllers(seed: int, args: argparse.Namespace, folder: Path) -> dict[str, float]:
    """Real seconds per report of each tool's whole tuning loop, one after the other."""
    return {
        "scaletune tuning loop + SQLite store (simulated backend)": scaletune_controller(
            seed, args.budget, folder
        ),
        "Optuna ask/report/should_prune/tell, in memory": optuna_controller(seed, 400, None),
        "Optuna ask/report/should_prune/tell, SQLite": optuna_controller(
            seed, 100, f"sqlite:///{folder / f'optuna-{seed}.db'}"
        ),
        "Ray Tune Tuner + ASHA, function trainable": ray_controller(
            seed, args.ray_trials, folder / "ray"
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=1500.0, help="simulated seconds")
    parser.add_argument("--ray-trials", type=int, default=64)
    args = parser.parse_args()
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    import ray

    rates: dict[str, list[float]] = {}
    per_report: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        ray.init(num_cpus=WORKERS, include_dashboard=False, log_to_driver=False)
        try:
            ray_controller(100, 4, folder / "ray")  # warm Ray's worker processes
            for seed in range(args.repeats):
                for name, rate in throughput(seed, args.budget).items():
                    rates.setdefault(name, []).append(rate)
                for name, seconds in controllers(seed, args, folder).items():
                    per_report.setdefault(name, []).append(seconds)
        finally:
            ray.shutdown()
    results = {
        "decisions_per_second": {name: summary(values) for name, values in rates.items()},
        "controller_seconds_per_report": {
            name: summary(values) for name, values in per_report.items()
        },
    }
    ours = statistics.median(per_report["scaletune tuning loop + SQLite store (simulated backend)"])
    our_rate = statistics.median(rates["scaletune HyperbandScheduler"])
    table = [
        ["measure", "tool", "median (min–max over repeats)", "vs scaletune"],
        *[
            [
                "scheduler decisions per second",
                name,
                f"{summary(values)['median']:,.0f} ({summary(values)['min']:,.0f}–"
                f"{summary(values)['max']:,.0f})",
                f"{summary(values)['median'] / our_rate:.2f}×",
            ]
            for name, values in rates.items()
        ],
        *[
            [
                "controller ms per report (decision + records)",
                name,
                f"{summary(values)['median'] * 1000:.3f} ({summary(values)['min'] * 1000:.3f}–"
                f"{summary(values)['max'] * 1000:.3f})",
                f"{summary(values)['median'] / ours:.2f}×",
            ]
            for name, values in per_report.items()
        ],
    ]
    write(
        "overhead_decisions",
        "Scheduler throughput and controller overhead per decision",
        results,
        table,
        f"""
{args.repeats} repeats. Throughput: the same event loop feeds each scheduler a stream of
reports ({WORKERS} trials at a time, up to {EPOCHS} epochs, {args.budget:g} simulated seconds);
decisions per second include drawing a random configuration per trial. Controller: real time
per report of a whole tuning job whose curves are known up front; scaletune writes every report,
trial and verdict to its SQLite store (the simulated backend, one transaction per report);
Optuna's in-memory storage keeps nothing on disk; Ray Tune's figure includes its actor messaging
(a trainable is a process of its own), which is what its controller costs per report.
""",
        environment=".bench-venv",
    )


if __name__ == "__main__":
    main()
