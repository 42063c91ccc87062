"""Per-job start overhead on Ray: the same 3-worker jobs on scaletune's local backend and on
its Ray backend, each cold (new workers) and warm (a group kept from the job before), against
Ray Train's own trainers. Two jobs: a DDP job (a gloo group, one DDP step, one report) against
`TorchTrainer`, overhead = a job's wall time minus the workers' own step time; and a
10-round XGBoost job on breast cancer (each worker its third of the rows, the model saved)
against `XGBoostTrainer`, compared by whole wall time. Rounds alternate the variants so that
machine noise falls on all.

    .bench-venv/bin/python -m benchmarks.overhead.ray_start [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks._report import summary, write
from benchmarks.overhead.trial_start import WORKERS, _Controller, _ray_worker
from scaletune.api import Session
from scaletune.cluster import Backend, LocalBackend, RayBackend
from scaletune.spec import training_spec_from_dict


def scaletune_job(session: Session, backend: str) -> tuple[float, float]:
    """Wall seconds of one job through the controller, and its workers' step seconds."""
    controller = _Controller(session.store, session.backend, session.location.jobs_dir)
    spec = training_spec_from_dict(
        {
            "algorithm": "script",
            "script": {"entry_point": "ddp-step"},  # replaced by the benchmark's program
            "instance_count": WORKERS,
            "channels": {"train": {"dataset": "breast-cancer"}},
            "cluster": {"backend": backend},
        }
    )
    started = time.perf_counter()
    record = controller.run(controller.prepare(spec))
    wall = time.perf_counter() - started
    if record.status.value != "Completed":
        raise RuntimeError(f"{backend} job: {record.status.value}: {record.failure_reason}")
    step = session.store.metrics(record.id, "train_seconds")[-1].value
    return wall, step


XGBOOST_ROUNDS = 10
Job = Callable[[Session, str], tuple[float, float]]


def scaletune_xgboost_job(session: Session, backend: str) -> tuple[float, float]:
    """Wall seconds of the built-in XGBoost job through the controller (no step to subtract)."""
    spec = training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "instance_count": WORKERS,
            "hyperparameters": {"num_round": XGBOOST_ROUNDS, "eval_metric": "logloss"},
            "channels": {"train": {"dataset": "breast-cancer"}},
            "cluster": {"backend": backend},
        }
    )
    started = time.perf_counter()
    record = session.controller.run(session.controller.prepare(spec))
    wall = time.perf_counter() - started
    if record.status.value != "Completed":
        raise RuntimeError(f"{backend} job: {record.status.value}: {record.failure_reason}")
    return wall, 0.0


def _xgboost_worker(config: dict[str, Any]) -> None:
    """Ray Train's XGBoost worker: its third of the rows, the same rounds, the model saved.
    Either every round reported (RayTrainReportCallback, checkpoint at the end), as scaletune
    records every round, or one report with the checkpoint at the end."""
    import ray.train
    import xgboost
    from ray.train.xgboost import RayTrainReportCallback
    from sklearn.datasets import load_breast_cancer

    features, labels = load_breast_cancer(return_X_y=True)
    context = ray.train.get_context()
    rank, size = context.get_world_rank(), context.get_world_size()
    rows = slice(rank * len(labels) // size, (rank + 1) * len(labels) // size)
    train = xgboost.DMatrix(features[rows], label=labels[rows])
    booster = xgboost.train(
        {"objective": "binary:logistic", "eval_metric": "logloss", "tree_method": "hist"},
        train,
        num_boost_round=config["rounds"],
        evals=[(train, "train")],
        callbacks=[RayTrainReportCallback()] if config["every_round"] else [],
        verbose_eval=False,
    )
    if not config["every_round"]:
        with tempfile.TemporaryDirectory() as folder:
            booster.save_model(str(Path(folder) / "model.ubj"))
            checkpoint = ray.train.Checkpoint.from_directory(folder) if rank == 0 else None
            ray.train.report({"rounds": config["rounds"]}, checkpoint=checkpoint)


def ray_train_xgboost_job(storage: Path, every_round: bool) -> tuple[float, float]:
    import ray.train
    from ray.train.xgboost import XGBoostTrainer

    storage.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    XGBoostTrainer(
        _xgboost_worker,
        train_loop_config={"rounds": XGBOOST_ROUNDS, "every_round": every_round},
        scaling_config=ray.train.ScalingConfig(num_workers=WORKERS, use_gpu=False),
        run_config=ray.train.RunConfig(
            name=f"xgboost-{time.monotonic_ns()}", storage_path=str(storage)
        ),
    ).fit()
    return time.perf_counter() - started, 0.0


def ray_train_job(storage: Path) -> tuple[float, float]:
    import ray.train
    from ray.train.torch import TorchTrainer

    step_file = storage / f"step-{time.monotonic_ns()}"
    storage.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    TorchTrainer(
        _ray_worker,
        train_loop_config={"step_file": str(step_file)},
        scaling_config=ray.train.ScalingConfig(num_workers=WORKERS, use_gpu=False),
        run_config=ray.train.RunConfig(
            name=f"job-{time.monotonic_ns()}", storage_path=str(storage)
        ),
    ).fit()
    wall = time.perf_counter() - started
    return wall, float(step_file.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    import ray

    # Room for the warm group kept between its jobs and another job's 3 workers beside it.
    ray.init(num_cpus=2 * WORKERS + 1, include_dashboard=False, log_to_driver=False)
    wall: dict[str, list[float]] = {}
    steps: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            warm_local, warm_ray = LocalBackend(), RayBackend()
            sessions: dict[str, Backend] = {"local warm": warm_local, "ray warm": warm_ray}

            def cold(backend: Callable[[], Backend], name: str, job: Job) -> tuple[float, float]:
                workers = backend()
                try:
                    with Session(folder / "store.db", backend=workers) as session:
                        return job(session, name)
                finally:
                    workers.close()

            def warm(label: str, name: str, job: Job) -> tuple[float, float]:
                with Session(folder / "store.db", backend=sessions[label]) as session:
                    return job(session, name)

            def local_cold() -> Backend:
                return LocalBackend(warm_pool=False)

            def ray_cold() -> Backend:
                return RayBackend(warm_pool=False)

            variants: dict[str, Callable[[], tuple[float, float]]] = {}
            for job_name, job in (("DDP", scaletune_job), ("XGBoost", scaletune_xgboost_job)):
                variants |= {
                    f"{job_name}: scaletune local, cold": partial(cold, local_cold, "local", job),
                    f"{job_name}: scaletune local, warm": partial(warm, "local warm", "local", job),
                    f"{job_name}: scaletune Ray, cold": partial(cold, ray_cold, "ray", job),
                    f"{job_name}: scaletune Ray, warm": partial(warm, "ray warm", "ray", job),
                }
                if job_name == "DDP":
                    variants["DDP: Ray Train"] = partial(ray_train_job, folder / "ray-train")
                else:
                    storage = folder / "ray-train-xgboost"
                    variants["XGBoost: Ray Train"] = partial(ray_train_xgboost_job, storage, True)
                    variants["XGBoost: Ray Train, one report at the end"] = partial(
                        ray_train_xgboost_job, storage, False
                    )
            for run in variants.values():
                run()  # once each first: imports, Ray's worker processes, warm groups
            for _ in range(args.rounds):
                for name, run in variants.items():
                    seconds, step = run()
                    wall.setdefault(name, []).append(seconds)
                    steps.setdefault(name, []).append(step)
            warm_local.close()
            warm_ray.close()
    finally:
        ray.shutdown()
    overhead = {
        name: [w - s for w, s in zip(wall[name], steps[name], strict=True)] for name in wall
    }
    table = [
        [
            "job: variant",
            "job wall seconds, median (min–max)",
            "of which the step",
            "overhead",
            "Ray Train ÷ this",
            "Ray Train, one report ÷ this",
        ]
    ]
    one_report = "XGBoost: Ray Train, one report at the end"
    for name in wall:
        reference = statistics.median(overhead[name.split(":")[0] + ": Ray Train"])
        own = statistics.median(overhead[name])
        table.append(
            [
                name,
                f"{summary(wall[name])['median']:.3f} ({summary(wall[name])['min']:.3f}–"
                f"{summary(wall[name])['max']:.3f})",
                f"{statistics.median(steps[name]) * 1000:.1f} ms"
                if name.startswith("DDP")
                else "—",
                f"{own:.3f} s",
                f"{reference / own:.1f}×",
                f"{statistics.median(overhead[one_report]) / own:.1f}×"
                if name.startswith("XGBoost")
                else "—",
            ]
        )
    results: dict[str, Any] = {
        "rounds": args.rounds,
        "workers": WORKERS,
        "wall_seconds": {name: summary(v) for name, v in wall.items()},
        "step_seconds": {name: summary(v) for name, v in steps.items()},
        "overhead_seconds": {name: summary(v) for name, v in overhead.items()},
    }
    write(
        "overhead_ray_start",
        "Per-job start overhead of 3-worker DDP and XGBoost jobs: local and Ray backends, cold "
        "and warm, vs Ray Train's TorchTrainer and XGBoostTrainer",
        results,
        table,
        f"""
{args.rounds} rounds, variants alternating, one run of each first. Cold: new workers for the
job (local: processes spawned and imports done; Ray: a placement group and 3 actors); warm: the
group kept from the job before. Ray Train: `TorchTrainer.fit()` / `XGBoostTrainer.fit()` per
job (Ray Train V2, no Tune). DDP overhead = wall minus the workers' step; XGBoost (10 rounds
on breast cancer, a third of the rows each, the model saved) is compared by whole wall time,
its training being the same few milliseconds in both. scaletune records every round's
metrics, as `XGBoost: Ray Train` does with `RayTrainReportCallback`; in Ray Train V2 each
`ray.train.report` is a round trip through its controller (about 2 s here), so `one report at
the end` isolates Ray Train's start and finish. scaletune's XGBoost job also checks and
prepares the data (the controller's share). One local Ray instance with {2 * WORKERS + 1}
logical CPUs for all Ray variants (the warm group keeps its 3 while the others run); its
start is not counted.
""",
        environment=".bench-venv",
    )


if __name__ == "__main__":
    main()
