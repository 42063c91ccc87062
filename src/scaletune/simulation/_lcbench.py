"""YAHPO Gym's LCBench surrogate (Pfisterer et al. 2022) as a curve source: an MLP trained for
up to 52 epochs on one of 34 OpenML tasks, with 7 hyperparameters; fidelity = epoch.

It needs `yahpo-gym` and `onnxruntime`, which pin numpy below 2: install them in an
environment of their own (see benchmarks/tuning/README.md), not in scaletune's own."""

from __future__ import annotations

import fcntl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scaletune.errors import InvalidInputError
from scaletune.simulation._curves import ClusterCosts, Curve, CurvePoint

EPOCHS = 52
# Epoch 1 is the untrained network (YAHPO's notes): its ranking of configurations says nothing
# of the final one (Kendall's tau with epoch 52 of -0.03 to 0.23 on 60 random configurations of
# tasks 3945, 7593 and 167161; epoch 2: 0.33 to 0.55). Curves start at epoch 2, whose time
# includes epoch 1's, and every method's first rung is there.
FIRST_EPOCH = 2
METRICS = ("val_accuracy", "val_cross_entropy", "val_balanced_accuracy")
# The search space as YAHPO defines it: (low, high, integer, log scale).
SPACE: dict[str, tuple[float, float, bool, bool]] = {
    "batch_size": (16, 512, True, True),
    "learning_rate": (1e-4, 1e-1, False, True),
    "max_dropout": (0.0, 1.0, False, False),
    "max_units": (64, 1024, True, True),
    "momentum": (0.1, 0.99, False, False),
    "num_layers": (1, 5, True, False),
    "weight_decay": (1e-5, 1e-1, False, False),
}


class LCBenchSurrogate:
    """A `CurveSource`: `val_accuracy` (percent) and cross-entropies at every epoch, each
    report arriving when the surrogate's own training time (one worker) says, plus `costs`."""

    def __init__(self, data_path: Path, task: str, costs: ClusterCosts | None = None) -> None:
        try:
            from yahpo_gym import benchmark_set, local_config
        except ImportError:
            raise InvalidInputError(
                "the LCBench surrogate needs yahpo-gym and onnxruntime: "
                "pip install -r benchmarks/tuning/requirements.txt (in an environment of their own)"
            ) from None
        if not (data_path / "lcbench" / "model.onnx").is_file():
            raise InvalidInputError(f"no LCBench surrogate under {str(data_path)!r}")
        # YAHPO keeps the data path in one file per user, which it truncates and rewrites:
        # processes that set it up at once (a benchmark's pool) can read it empty. One at a
        # time; the config is then cached in this process and the file not read again.
        lock_path = local_config.settings_path.with_name("yahpo_gym.lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with lock_path.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            local_config.init_config()
            local_config.set_data_path(str(data_path))
            self._benchmark: Any = benchmark_set.BenchmarkSet("lcbench", multithread=False)
        if task not in self._benchmark.instances:
            raise InvalidInputError(f"LCBench has no task {task!r}")
        self._benchmark.set_instance(task)
        self.task = task
        self.costs = costs or ClusterCosts()

    def curve(self, hyperparameters: Mapping[str, object], instance_count: int) -> Curve:
        config: dict[str, object] = {"OpenML_task_id": self.task}
        for name, (_, _, integer, _) in SPACE.items():
            value = hyperparameters[name]
            if not isinstance(value, int | float):
                raise InvalidInputError(f"LCBench: {name}={value!r} is not a number")
            config[name] = round(value) if integer else float(value)
        epochs = range(FIRST_EPOCH, EPOCHS + 1)
        rows = self._benchmark.objective_function([{**config, "epoch": e} for e in epochs])
        arrivals = self.costs.arrival_seconds([float(row["time"]) for row in rows], instance_count)
        points = [
            CurvePoint(epoch, seconds, {name: float(row[name]) for name in METRICS})
            for epoch, row, seconds in zip(epochs, rows, arrivals, strict=True)
        ]
        return Curve(points, full_resource=EPOCHS, start_seconds=self.costs.start_seconds)
