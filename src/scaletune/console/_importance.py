"""Hyperparameter importance: Optuna's PED-ANOVA over the trials, compared at one resource.

Early stopping leaves trials at different resources, and a value at step 3 is not
comparable with one at step 81. So the values compared are those at the highest resource
that enough trials reached (each trial's latest report at or below it), not final values."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from scaletune.analysis._values import tuned_value
from scaletune.spec import ParameterRange
from scaletune.store import MetricPoint, TrialRow, TuningJobRecord

MIN_TRIALS = 10  # fewer trials than this at any resource: no estimate


@dataclass(frozen=True)
class Importance:
    resource: int | None  # the resource the trials were compared at
    trials: int
    importances: dict[str, float]  # name -> share, largest first; empty when too few trials
    note: str | None = None


def comparison_resource(rows: Sequence[TrialRow], minimum: int = MIN_TRIALS) -> int | None:
    """The highest resource that `minimum` trials reached."""
    reached = sorted((row.resource for row in rows if row.resource is not None), reverse=True)
    return reached[minimum - 1] if len(reached) >= minimum else None


def importance(
    record: TuningJobRecord,
    rows: Sequence[TrialRow],
    curves: Mapping[str, list[MetricPoint]],
    seed: int = 0,
) -> Importance:
    resource = comparison_resource(rows)
    if resource is None:
        return Importance(None, 0, {}, f"needs {MIN_TRIALS} trials with a reported objective")
    values = {}
    for row in rows:
        if row.resource is None or row.resource < resource:
            continue
        at = [p.value for p in curves.get(row.id, []) if p.step <= resource]
        if at and math.isfinite(at[-1]):
            values[row.id] = at[-1]
    # each range alone: the whole stored spec would check data paths that may be gone now
    ranges = {
        name: TypeAdapter(ParameterRange).validate_python(given)
        for name, given in record.spec.get("ranges", {}).items()
    }
    if len(ranges) < 2:
        only = next(iter(ranges))
        return Importance(resource, len(values), {only: 1.0}, "one tuned name")
    import optuna

    distributions = {name: ranged.distribution() for name, ranged in ranges.items()}
    trials = [
        optuna.trial.create_trial(
            params={
                name: ranged.to_sample(tuned_value(row, name))  # type: ignore[arg-type]
                for name, ranged in ranges.items()
            },
            distributions=distributions,
            value=values[row.id],
        )
        for row in rows
        if row.id in values
    ]
    if len(trials) < MIN_TRIALS:
        return Importance(resource, len(trials), {}, f"needs {MIN_TRIALS} comparable trials")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    maximize = record.spec_view.objective.maximize
    study = optuna.create_study(direction="maximize" if maximize else "minimize")
    study.add_trials(trials)
    evaluator = optuna.importance.PedAnovaImportanceEvaluator()
    found: dict[str, Any] = optuna.importance.get_param_importances(study, evaluator=evaluator)
    return Importance(resource, len(trials), {k: float(v) for k, v in found.items()})
