"""What the plain (no scaletune) baselines share: the data as files, and a spawned group."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from scaletune.data import Table


def save_splits(splits: Mapping[str, Table], folder: Path) -> None:
    """train_x/train_y/valid_x/valid_y .npy files, as the baseline workers read them."""
    for split, prefix in (("train", "train"), ("validation", "valid")):
        np.save(folder / f"{prefix}_x.npy", splits[split].features)
        np.save(folder / f"{prefix}_y.npy", splits[split].labels)


def run_group(
    target: Callable[..., None], world: int, args: tuple[Any, ...], timeout: float
) -> Any:
    """Spawn `world` processes running target(rank, world, *args, results); return what rank 0
    puts on the results queue once all have ended."""
    context = mp.get_context("spawn")
    results = context.Queue()
    workers = [
        context.Process(target=target, args=(rank, world, *args, results)) for rank in range(world)
    ]
    for worker in workers:
        worker.start()
    result = results.get(timeout=timeout)
    for worker in workers:
        worker.join()
    return result
