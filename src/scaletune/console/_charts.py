"""What a tuning job's charts plot, as plain JSON-ready data: built from the store's light
trial rows and, for the learning curves, the curves of the best trials only (a page of
10,000 trials draws 50 curves and one dot per trial, not 10,000 lines)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scaletune.analysis import best_so_far, hyperband_brackets, tuned_value
from scaletune.store import JobStatus, MetricPoint, TrialRow, TuningJobRecord

CURVES_SHOWN = 50  # learning curves drawn in full: the best trials by objective


@dataclass(frozen=True)
class Objective:
    metric: str
    maximize: bool

    @classmethod
    def of(cls, record: TuningJobRecord) -> Objective:
        objective = record.spec_view.objective
        return cls(objective.metric, objective.maximize)

    def best(self, values: Sequence[float]) -> float:
        return max(values) if self.maximize else min(values)

    def ranked(self, rows: Sequence[TrialRow]) -> list[TrialRow]:
        """Trials with an objective, the best first."""
        scored = [row for row in rows if _finite(row.objective)]
        sign = -1.0 if self.maximize else 1.0
        return sorted(scored, key=lambda row: sign * (row.objective or 0.0))


def rungs_of(record: TuningJobRecord) -> list[int]:
    """Every rung of the job's Hyperband brackets (the resources where it decides)."""
    settings = record.spec_view.hyperband
    if settings is None:
        return []
    brackets, _ = hyperband_brackets(
        settings.min_resource, settings.max_resource, settings.eta, settings.brackets
    )
    return sorted({rung for bracket in brackets for rung in bracket})


def curves_chart(
    objective: Objective,
    rungs: list[int],
    shown: Sequence[TrialRow],
    curves: Mapping[str, list[MetricPoint]],
) -> dict[str, Any]:
    """uPlot's columns: the steps, then one series per trial (None where it has no value)."""
    by_trial = {row.id: [(p.step, p.value) for p in curves.get(row.id, [])] for row in shown}
    steps, columns = aligned(by_trial)
    series = [
        {"label": _trial_label(row), "status": row.status.value, "values": columns[row.id]}
        for row in shown
    ]
    return {"metric": objective.metric, "steps": steps, "series": series, "rungs": rungs}


def aligned(
    lines: Mapping[str, Sequence[tuple[int, float]]],
) -> tuple[list[int], dict[str, list[float | None]]]:
    """Curves on one x axis, as uPlot draws them: every step any curve has, and each curve's
    value at each (None where it has none)."""
    steps = sorted({step for points in lines.values() for step, _ in points})
    at = {step: i for i, step in enumerate(steps)}
    columns: dict[str, list[float | None]] = {}
    for key, points in lines.items():
        values: list[float | None] = [None] * len(steps)
        for step, value in points:
            values[at[step]] = value
        columns[key] = values
    return steps, columns


def stops_chart(objective: Objective, rows: Sequence[TrialRow]) -> dict[str, Any]:
    """Where each trial ended: the resource it reached and its objective there."""
    points = [
        {"x": row.resource, "y": row.objective, "status": row.status.value, "id": row.id}
        for row in rows
        if row.resource is not None and _finite(row.objective)
    ]
    return {"metric": objective.metric, "points": points}


def best_so_far_chart(objective: Objective, rows: Sequence[TrialRow]) -> dict[str, Any]:
    """The best objective among ended trials against the billable worker-seconds spent by
    then (every ended trial's, in the order they ended)."""
    ended = sorted(
        (row for row in rows if row.end_time is not None and row.status.is_terminal),
        key=lambda row: row.end_time or 0.0,
    )
    xs = list(itertools.accumulate(row.billable_seconds or 0.0 for row in ended))
    ys = best_so_far(
        (None if row.status is JobStatus.FAILED else row.objective for row in ended),
        objective.maximize,
    )
    return {"metric": objective.metric, "billable_seconds": xs, "best": ys}


def parallel_chart(
    record: TuningJobRecord, objective: Objective, rows: Sequence[TrialRow]
) -> dict[str, Any]:
    """One axis per tuned name and one for the objective; categorical values as labels."""
    ranges = record.spec_view.ranges
    scored = [row for row in rows if _finite(row.objective)]
    axes: list[dict[str, Any]] = []
    for name, tuned in ranges.items():
        values = [tuned_value(row, name) for row in scored]
        if tuned.is_categorical:
            labels = [str(v) for v in tuned.values]
            axes.append(
                {
                    "name": name,
                    "labels": labels,
                    "values": [_label_index(labels, v) for v in values],
                }
            )
        else:
            axes.append(
                {"name": name, "log": tuned.is_logarithmic, "values": [_number(v) for v in values]}
            )
    axes.append(
        {"name": objective.metric, "values": [row.objective for row in scored], "objective": True}
    )
    return {"axes": axes, "maximize": objective.maximize, "count": len(scored)}


def cluster_chart(objective: Objective, rows: Sequence[TrialRow]) -> dict[str, Any] | None:
    """Objective and billable cost against cluster size, when the trials' sizes differ."""
    if len({row.instance_count for row in rows}) < 2:
        return None
    done = [row for row in rows if _finite(row.objective) and row.billable_seconds is not None]
    return {
        "metric": objective.metric,
        "points": [
            {
                "x": row.instance_count,
                "y": row.objective,
                "cost": row.billable_seconds,
                "status": row.status.value,
            }
            for row in done
        ],
    }


def _trial_label(row: TrialRow) -> str:
    return f"#{row.trial_number}" if row.trial_number is not None else row.id


def _label_index(labels: list[str], value: object) -> int | None:
    text = str(value)
    return labels.index(text) if text in labels else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
