"""The baseline: the same classifier as a plain PyTorch DDP script, no scaletune."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as functional
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from benchmarks._baseline import run_group


def train_worker(
    rank: int, world: int, port: int, data: Path, settings: dict[str, Any], out: Any
) -> None:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(minutes=5),
    )
    features = torch.from_numpy(np.load(data / "train_x.npy"))
    labels = torch.from_numpy(np.load(data / "train_y.npy")).long()
    rows = torch.from_numpy(np.array_split(np.arange(len(labels)), world)[rank])
    shard_x, shard_y = features[rows], labels[rows]
    valid_x = torch.from_numpy(np.load(data / "valid_x.npy"))
    valid_y = torch.from_numpy(np.load(data / "valid_y.npy")).long()
    torch.manual_seed(settings["seed"])
    model = nn.Sequential(
        nn.Linear(features.shape[1], settings["hidden_units"]),
        nn.ReLU(),
        nn.Linear(settings["hidden_units"], 10),
    )
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=settings["learning_rate"], momentum=settings["momentum"]
    )
    batch = settings["batch_size"]
    times, accuracy = [], 0.0
    for epoch in range(1, settings["epochs"] + 1):
        order = torch.from_numpy(
            np.random.default_rng([settings["seed"], epoch, rank]).permutation(len(shard_y))
        )
        loss_sum = 0.0
        for start in range(0, len(order), batch):
            index = order[start : start + batch]
            loss = functional.cross_entropy(ddp(shard_x[index]), shard_y[index])
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            loss_sum += float(loss.detach()) * len(index)  # for the epoch's log line
        if rank == 0:
            with torch.no_grad():
                accuracy = float((model(valid_x).argmax(dim=1) == valid_y).float().mean())
            times.append(time.time())
    if rank == 0:
        out.put((times, accuracy))
    dist.barrier()
    dist.destroy_process_group()


def run_plain(
    data: Path, settings: dict[str, Any], world: int, port: int
) -> tuple[list[float], float]:
    """Epoch end times on rank 0, and the final validation accuracy."""
    times, accuracy = run_group(train_worker, world, (port, data, settings), 1800)
    return times, accuracy
