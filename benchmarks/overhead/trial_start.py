"""Per-trial overhead of a real 3-worker job: scaletune (warm pool) against Ray Tune + Ray Train.

Every trial is the same data-parallel job: 3 workers join a gloo group, take one DDP step on a
tiny model (one all-reduce), report, and leave. The work inside is measured by the workers
(`train_seconds`); a trial's overhead is what a tuning job spends per trial beyond it: placing
the workers, the group's set-up, hand-off, reporting, tear-down, records. Both tools run
trials one at a time; rounds alternate scaletune and Ray so that machine noise falls on both.

    .bench-venv/bin/python -m benchmarks.overhead.trial_start [--trials 8 --rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks._programs import ddp_model_step, ddp_step
from benchmarks._report import summary, write
from scaletune.algorithms.script import ScriptAlgorithm
from scaletune.api import Session
from scaletune.cluster import LocalBackend
from scaletune.spec import TrainingJobSpec, TuningJobSpec, tuning_spec_from_dict
from scaletune.training import PreparedJob, TrainingController
from scaletune.tuning import TuningController
from scaletune.worker import WorkerProgram

WORKERS = 3


class _DDPStep(ScriptAlgorithm):
    """A script job's record, data (bundled breast cancer, sharded) and checks; our program in
    the workers instead of a user's, so no interpreter starts per trial on either side."""

    @property
    def program(self) -> WorkerProgram:
        return ddp_step


class _Controller(TrainingController):
    def prepare(self, spec: TrainingJobSpec, **kwargs: Any) -> PreparedJob:
        return dataclasses.replace(super().prepare(spec, **kwargs), algorithm=_DDPStep())


def _spec(trials: int) -> TuningJobSpec:
    channel = {"dataset": "breast-cancer"}
    return tuning_spec_from_dict(
        {
            "objective_metric": "loss",
            "objective_type": "Minimize",
            "strategy": "Random",
            "ranges": {"eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1}},
            "max_jobs": trials,
            "training": {
                "algorithm": "script",
                "script": {"entry_point": "ddp-step"},  # replaced by the program above
                "instance_count": WORKERS,
                "channels": {"train": channel},
            },
        }
    )


def scaletune_round(session: Session, trials: int) -> tuple[float, list[float]]:
    """Seconds per trial (the tuning job's wall time / trials) and the workers' step times."""
    controller = _Controller(session.store, session.backend, session.location.jobs_dir)
    tuner = TuningController(controller, poll_seconds=0.01)
    spec = _spec(trials)
    started = time.perf_counter()
    record = tuner.run(tuner.create(spec), spec)
    wall = time.perf_counter() - started
    steps = [
        point.value
        for trial in session.store.training_jobs_of(record.id)
        for point in session.store.metrics(trial.id, "train_seconds")
    ]
    if len(steps) != trials:
        raise RuntimeError(f"scaletune: {len(steps)} of {trials} trials reported")
    return wall / trials, steps


def _ray_worker(config: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch
    import torch
    from torch import nn

    torch.set_num_threads(1)
    started = time.perf_counter()
    loss = ddp_model_step(ray.train.torch.prepare_model(nn.Linear(16, 2)))
    torch.distributed.barrier()
    seconds = time.perf_counter() - started
    if "step_file" in config and ray.train.get_context().get_world_rank() == 0:
        # A Ray Train run without Tune keeps no metrics without a checkpoint: a file instead.
        Path(config["step_file"]).write_text(str(seconds))
    ray.train.report({"loss": loss, "train_seconds": seconds})


def _ray_driver(config: dict[str, Any]) -> None:
    import ray.train
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    TorchTrainer(
        _ray_worker,
        train_loop_config=config,
        scaling_config=ray.train.ScalingConfig(num_workers=WORKERS, use_gpu=False),
        run_config=ray.train.RunConfig(
            name=f"trial-{uuid.uuid4().hex[:8]}",
            storage_path=config["storage"],
            callbacks=[TuneReportCallback()],
        ),
    ).fit()


def ray_round(trials: int, storage: Path) -> tuple[float, list[float]]:
    from ray import tune

    tuner = tune.Tuner(
        tune.with_resources(_ray_driver, {"cpu": 1}),  # the trial driver; workers take 3 more
        param_space={"eta": tune.uniform(0.01, 1.0), "storage": str(storage)},
        tune_config=tune.TuneConfig(num_samples=trials, max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(storage), name=f"round-{uuid.uuid4().hex[:8]}"),
    )
    started = time.perf_counter()
    results = tuner.fit()
    wall = time.perf_counter() - started
    steps = [float(result.metrics["train_seconds"]) for result in results]
    if len(steps) != trials or results.errors:
        raise RuntimeError(f"Ray: {len(steps)} of {trials} trials reported; {results.errors}")
    return wall / trials, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    import ray

    per_trial: dict[str, list[float]] = {"scaletune": [], "ray": []}
    steps: dict[str, list[float]] = {"scaletune": [], "ray": []}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        ray_started = time.perf_counter()
        # Enough logical CPUs for 3 workers (and the trial's driver) on any machine.
        ray.init(num_cpus=WORKERS + 1, include_dashboard=False, log_to_driver=False)
        ray_init_seconds = time.perf_counter() - ray_started
        try:
            with (
                LocalBackend(max_idle_workers=WORKERS) as backend,
                Session(folder / "store.db", backend=backend) as session,
            ):
                scaletune_round(session, 1)  # fill the warm pool
                ray_round(1, folder / "ray")  # and Ray's worker processes
                for _ in range(args.rounds):
                    rounds = {
                        "scaletune": scaletune_round(session, args.trials),
                        "ray": ray_round(args.trials, folder / "ray"),
                    }
                    for tool, (seconds, step_times) in rounds.items():
                        per_trial[tool].append(seconds)
                        steps[tool].extend(step_times)
        finally:
            ray.shutdown()
    overhead = {
        tool: [t - statistics.median(steps[tool]) for t in per_trial[tool]] for tool in per_trial
    }
    ratio = statistics.median(overhead["ray"]) / statistics.median(overhead["scaletune"])
    stats = {tool: summary(values) for tool, values in overhead.items()}
    results = {
        "trials_per_round": args.trials,
        "rounds": args.rounds,
        "workers": WORKERS,
        "seconds_per_trial": {tool: summary(v) for tool, v in per_trial.items()},
        "train_seconds": {tool: summary(v) for tool, v in steps.items()},
        "overhead_seconds_per_trial": stats,
        "ratio_ray_over_scaletune": ratio,
        "ray_init_seconds": ray_init_seconds,
    }
    table = [
        ["tool", "seconds per trial, median (min–max of rounds)", "of which the step", "overhead"],
        *[
            [
                "scaletune (warm pool)" if tool == "scaletune" else "Ray Tune + Ray Train",
                f"{summary(per_trial[tool])['median']:.3f} "
                f"({summary(per_trial[tool])['min']:.3f}–{summary(per_trial[tool])['max']:.3f})",
                f"{statistics.median(steps[tool]) * 1000:.1f} ms",
                f"{stats[tool]['median']:.3f} s",
            ]
            for tool in ("scaletune", "ray")
        ],
        ["ratio of median overheads, Ray / scaletune", "", "", f"{ratio:.1f}×"],
    ]
    write(
        "overhead_trial_start",
        "Per-trial overhead of a 3-worker DDP job: scaletune (warm pool) vs Ray Tune + Ray Train",
        results,
        table,
        f"""
Each trial: 3 workers, a gloo group, one DDP step on a tiny model, one report. {args.rounds}
rounds of {args.trials} trials each, alternating tools; one trial per tool first to warm both.
Overhead = seconds per trial (a tuning job's wall time / trials) minus the workers' own step
time. Ray's start-up (`ray.init`, {ray_init_seconds:.1f} s) is not counted; Ray Train V2,
{WORKERS + 1} logical CPUs.
""",
        environment=".bench-venv",
    )


if __name__ == "__main__":
    main()
