"""What a trial was given and how fast it went: read by the tuner and by its summaries."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from scaletune.spec._names import CLUSTER_SIZE
from scaletune.store import MetricPoint, TrainingJobRecord, TrialRow


def seconds_per_step(series: Sequence[MetricPoint]) -> float | None:
    """A trial's wall time per step of resource, between its first and last report."""
    if len(series) < 2 or series[-1].step <= series[0].step:
        return None
    return (series[-1].time - series[0].time) / (series[-1].step - series[0].step)


def tuned_value(trial: TrainingJobRecord | TrialRow, name: str) -> object:
    """What a trial was given for a tuned name: a hyperparameter, or its cluster size."""
    return trial.instance_count if name == CLUSTER_SIZE else trial.hyperparameters.get(name)


def best_so_far(values: Iterable[float | None], maximize: bool) -> list[float | None]:
    """The best of the values up to each one, in their order (None until one is known; a
    value that is None or not finite counts for nothing)."""
    best: float | None = None
    bests: list[float | None] = []
    for value in values:
        if value is None or not math.isfinite(value):
            bests.append(best)
            continue
        if best is None or (value > best if maximize else value < best):
            best = value
        bests.append(best)
    return bests
