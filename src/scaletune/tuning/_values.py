"""What a trial was given and how fast it went: read by the tuner and by its summaries."""

from __future__ import annotations

from collections.abc import Sequence

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
