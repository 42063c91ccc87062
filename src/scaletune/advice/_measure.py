"""What one finished run measured about its own speed: its time per step, the time outside
its steps (starting workers, loading data, saving the model), and when its quality metric
first reached a value. An elastic run that changed size measured each size it ran at."""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scaletune.errors import InvalidInputError
from scaletune.store import AttemptRecord, JobStatus, MetricPoint, TrainingJobRecord

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
    _check_measurable(record, series)
    step_seconds = statistics.median(_gaps(series))
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


def measure_sizes(
    record: TrainingJobRecord,
    series: Sequence[MetricPoint],
    attempts: Sequence[AttemptRecord],
    extra_tasks: int = 0,
) -> list[RunMeasure]:
    """Each size a finished run ran at, measured from the reports of its attempts at that
    size (a gap across a resize is a restart, not a step), the size with the most steps
    first. The time outside steps is the run's as a whole, given to every size: its restarts
    are not a size's start-up. One size: as `measure_run`."""
    # measure_run checks that the run can be measured at all.
    whole = measure_run(record, series, record.instance_count + extra_tasks)
    gaps: dict[int, list[float]] = {}
    steps: dict[int, int] = {}
    done = 0  # the last step reported before this attempt
    for attempt in attempts:
        end = attempt.end_time if attempt.end_time is not None else float("inf")
        within = [p for p in series if attempt.start_time <= p.time <= end]
        workers = attempt.size - extra_tasks
        if workers < 1 or not within:
            continue
        gaps.setdefault(workers, []).extend(_gaps(within))
        steps[workers] = steps.get(workers, 0) + max(0, within[-1].step - done)
        done = max(done, within[-1].step)
    sizes = sorted((w for w in gaps if len(gaps[w]) >= 2), key=lambda w: (-steps[w], w))
    if not sizes:  # no attempt placed long enough to tell (or none recorded where)
        return [whole]
    if len(sizes) == 1:  # an elastic job may have run at one size below its most
        return [dataclasses.replace(whole, workers=sizes[0], tasks=sizes[0] + extra_tasks)]
    measures = [
        RunMeasure(
            job_id=record.id,
            workers=workers,
            tasks=workers + extra_tasks,
            step_seconds=statistics.median(gaps[workers]),
            overhead_seconds=0.0,  # set below, once the steps' time is known
            steps_run=steps[workers],
            wall_seconds=whole.wall_seconds,
        )
        for workers in sizes
    ]
    in_steps = sum(m.steps_run * m.step_seconds for m in measures)
    overhead = max(0.0, whole.wall_seconds - in_steps)
    return [dataclasses.replace(m, overhead_seconds=overhead) for m in measures]


def start_seconds(
    attempts: Sequence[AttemptRecord], series: Sequence[MetricPoint], step_seconds: float
) -> float | None:
    """What an attempt's start costs before its first step: from an attempt's start (its data
    already staged) to its first report, less that step; the least over its attempts (a
    backend's first job also pays for its workers' first imports, which a restart on warm
    workers does not). What a restart costs, not the run's time outside steps, which also
    holds staging the data and saving the model once. None: not recorded."""
    starts = []
    for attempt in attempts:
        end = attempt.end_time if attempt.end_time is not None else float("inf")
        first = next((p for p in series if attempt.start_time <= p.time <= end), None)
        if first is not None:
            starts.append(max(first.time - attempt.start_time - step_seconds, 0.0))
    return min(starts, default=None)


def _check_measurable(record: TrainingJobRecord, series: Sequence[MetricPoint]) -> None:
    if record.status is not JobStatus.COMPLETED:
        raise InvalidInputError(
            f"job {record.id!r} is {record.status.value}: advice needs a Completed run"
        )
    if len(series) < 3:
        raise InvalidInputError(
            f"job {record.id!r} reported {series[0].name if series else 'its metric'} "
            f"{len(series)} time(s): a step time needs 3 reports or more"
        )


def _gaps(series: Sequence[MetricPoint]) -> list[float]:
    """Seconds per step between consecutive reports."""
    return [
        (later.time - earlier.time) / (later.step - earlier.step)
        for earlier, later in itertools.pairwise(series)
        if later.step > earlier.step
    ]


def first_reaching(
    series: Sequence[MetricPoint], target: float, maximize: bool, tolerance: float = 0.0
) -> MetricPoint | None:
    """The first report at least as good as `target` (less `tolerance`); None if none is."""
    for point in series:
        if (point.value >= target - tolerance) if maximize else (point.value <= target + tolerance):
            return point
    return None
