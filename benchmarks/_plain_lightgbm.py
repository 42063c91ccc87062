"""The baseline: LightGBM data-parallel as a plain script over its own network, no scaletune
(the same shards, bins from the whole training split, parameters and evaluation set)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np

from benchmarks._baseline import run_group
from scaletune.cluster import free_port


def train_worker(
    rank: int,
    world: int,
    ports: list[int],
    data: Path,
    params: dict[str, Any],
    rounds: int,
    out: Any,
) -> None:
    features = np.load(data / "train_x.npy")
    labels = np.load(data / "train_y.npy")
    rows = np.array_split(np.arange(len(labels)), world)[rank]
    dataset_params = {name: params[name] for name in ("max_bin", "min_data_in_leaf", "verbosity")}
    bins = lgb.Dataset(features, params=dataset_params).construct()
    network: dict[str, Any] = {}
    if world > 1:
        network = {
            "tree_learner": "data",
            "num_machines": world,
            "machines": ",".join(f"127.0.0.1:{port}" for port in ports),
            "local_listen_port": ports[rank],
            "pre_partition": True,
        }
    train = lgb.Dataset(features[rows], labels[rows], reference=bins, params=dataset_params)
    valid = lgb.Dataset(
        np.load(data / "valid_x.npy"), np.load(data / "valid_y.npy"), reference=train
    )
    times: list[float] = []
    log: dict[str, Any] = {}
    booster = lgb.train(
        {**params, **network},
        train,
        rounds,
        valid_sets=[valid],
        valid_names=["validation"],
        callbacks=[lambda env: times.append(time.time()), lgb.record_evaluation(log)],
    )
    if world > 1:
        booster.free_network()
    if rank == 0:
        out.put((times, log["validation"]["auc"][-1]))


def run_plain(
    data: Path, params: dict[str, Any], rounds: int, world: int
) -> tuple[list[float], float]:
    """Round end times on rank 0, and the final validation AUC."""
    ports = [free_port() for _ in range(world)]
    times, auc = run_group(train_worker, world, (ports, data, params, rounds), 600)
    return times, auc
