"""The baseline: distributed XGBoost as a plain xgboost.collective script, no scaletune."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

from benchmarks._baseline import run_group


class _RoundTimes(xgb.callback.TrainingCallback):
    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        self.times.append(time.time())
        return False


class _FreshSamplers(xgb.callback.TrainingCallback):
    """What scaletune does so that a sampled job resumes exactly (its `sampler_period`):
    XGBoost's tree updaters, and their column samplers, built anew every `period` rounds.
    Both runners then grow the same trees."""

    def __init__(self, period: int) -> None:
        super().__init__()
        self.period = period

    def before_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        if epoch > 0 and epoch % self.period == 0:
            model.load_config(model.save_config())
        return False


def train_worker(
    rank: int,
    world: int,
    args: dict[str, Any],
    data: Path,
    params: dict[str, Any],
    rounds: int,
    period: int,
    out: Any,
) -> None:
    features = np.load(data / "train_x.npy")
    labels = np.load(data / "train_y.npy")
    rows = np.array_split(np.arange(len(labels)), world)[rank]
    with collective.CommunicatorContext(dmlc_task_id=f"{rank:06d}", **args):
        dtrain = xgb.DMatrix(features[rows], label=labels[rows], nthread=params["nthread"])
        dvalid = xgb.DMatrix(
            np.load(data / "valid_x.npy"),
            label=np.load(data / "valid_y.npy"),
            nthread=params["nthread"],
        )
        timer = _RoundTimes()
        log: dict[str, Any] = {}
        xgb.train(
            params,
            dtrain,
            rounds,
            evals=[(dtrain, "train"), (dvalid, "validation")],
            evals_result=log,
            verbose_eval=False,
            callbacks=[_FreshSamplers(period), timer],
        )
    if rank == 0:
        out.put((timer.times, log["validation"]["auc"][-1]))


def run_plain(
    data: Path, params: dict[str, Any], rounds: int, world: int, period: int
) -> tuple[list[float], float]:
    """Round end times on rank 0, and the final validation AUC."""
    tracker = RabitTracker(n_workers=world, host_ip="127.0.0.1", sortby="task")
    tracker.start()
    worker_args = (tracker.worker_args(), data, params, rounds, period)
    times, auc = run_group(train_worker, world, worker_args, 600)
    tracker.wait_for(60)
    tracker.free()
    return times, auc
