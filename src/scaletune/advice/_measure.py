"""What one finished run measured about its own speed: its time per step, the time outside
its steps (starting workers, loading data, saving the model), and when its quality metric
first reached a value."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scaletune.errors import InvalidInputError
from scaletune.store import JobStatus, MetricPoint, TrainingJobRecord

# Metric names (after "train:" / "validation:") where lower is better; any other is maximised.
_LOWER_IS_BETTER = ("loss", "logloss", "mlogloss", "error", "merror", "rmse", "mae", "mape")


def lower_is_better(metric: str) -> bool:
    return metric.rsplit(":", 1)[-1].split("@")[0] in _LOWER_IS_BETTER


@dataclass(frozen=True)
class RunMeasure:
    job_id: str
    workers: int
    tasks: int  # processes billed: the workers, and a parameter-server job's chief and servers
    step_seconds: float  # the median time between consecutive reports of the metric
    overhead_seconds: float  # wall time outside its steps
    steps_run: int
    wall_seconds: float


def measure_run(record: TrainingJobRecord, series: Sequence[MetricPoint], tasks: int) -> RunMeasure:
    """Speed from a finished run's reports: a step is the span between two reports (the
    first step also holds the start-up, so it is not one of them)."""
    if record.status is not JobStatus.COMPLETED:
        raise InvalidInputError(
            f"job {record.id!r} is {record.status.value}: advice needs a Completed run"
        )
    if len(series) < 3:
        raise InvalidInputError(
            f"job {record.id!r} reported {series[0].name if series else 'its metric'} "
            f"{len(series)} time(s): a step time needs 3 reports or more"
        )
    gaps = [
        (later.time - earlier.time) / (later.step - earlier.step)
        for earlier, later in itertools.pairwise(series)
        if later.step > earlier.step
    ]
    step_seconds = statistics.median(gaps)
    steps = series[-1].step
    wall = record.wall_seconds or 0.0
    return RunMeasure(
        job_id=record.id,
        workers=record.instance_count,
        tasks=tasks,
        step_seconds=step_seconds,
        overhead_seconds=max(0.0, wall - steps * step_seconds),
        steps_run=steps,
        wall_seconds=wall,
    )


def first_reaching(
    series: Sequence[MetricPoint], target: float, maximize: bool, tolerance: float = 0.0
) -> MetricPoint | None:
    """The first report at least as good as `target` (less `tolerance`); None if none is."""
    for point in series:
        if (point.value >= target - tolerance) if maximize else (point.value <= target + tolerance):
            return point
    return None
