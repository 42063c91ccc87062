"""Learning curves recorded by a stored tuning job, replayed: every trial's reports at the
moments they arrived (start-up included) and the way it ended. A configuration that was never
run gets the curve of the nearest one that was, measured on the job's own ranges."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from pydantic import ValidationError

from scaletune.algorithms import get_algorithm
from scaletune.analysis._values import tuned_value
from scaletune.errors import InvalidInputError
from scaletune.simulation._curves import Curve, CurvePoint
from scaletune.simulation._simulate import simulate_tuning
from scaletune.spec import (
    ParameterRange,
    TuningJobSpec,
    apply_override,
    describe_validation_error,
    tuning_spec_from_dict,
)
from scaletune.spec._names import CLUSTER_SIZE
from scaletune.store import JobStatus, MetricPoint, Store, TrainingJobRecord, TuningJobRecord


@dataclass(frozen=True)
class _Recorded:
    tuned: dict[str, object]  # the values of the tuned names, cluster size included
    curve: Curve


class ReplaySource:
    """A `CurveSource` over the trials of one stored tuning job."""

    def __init__(self, spec: TuningJobSpec, recorded: list[_Recorded]) -> None:
        if not recorded:
            raise InvalidInputError("replay: the tuning job has no trial with a report to replay")
        self.spec = spec
        self._recorded = recorded

    @classmethod
    def from_store(cls, store: Store, tuning_job_id: str) -> ReplaySource:
        record = store.get_tuning_job(tuning_job_id)
        try:
            spec = TuningJobSpec.model_validate(record.spec)
        except ValidationError as exc:
            raise InvalidInputError(
                f"replay: tuning job {tuning_job_id!r}: {describe_validation_error(exc)}"
            ) from None
        recorded = [
            _Recorded(
                {name: tuned_value(trial, name) for name in spec.ranges},
                _curve_of(trial, store.metrics(trial.id), _pauses(store, trial)),
            )
            for trial in store.training_jobs_of(tuning_job_id)
            if trial.status.is_terminal and trial.start_time is not None
        ]
        return cls(spec, recorded)

    def curve(self, hyperparameters: Mapping[str, object], instance_count: int) -> Curve:
        wanted = {
            name: instance_count if name == CLUSTER_SIZE else hyperparameters.get(name)
            for name in self.spec.ranges
        }
        nearest = min(self._recorded, key=lambda known: self._distance(wanted, known.tuned))
        return nearest.curve

    def _distance(self, a: Mapping[str, object], b: Mapping[str, object]) -> float:
        return sum(
            _gap(parameter, a[name], b[name]) ** 2 for name, parameter in self.spec.ranges.items()
        )


def _pauses(store: Store, trial: TrainingJobRecord) -> list[tuple[float, float]]:
    """When the trial was paused (promotion-type Hyperband): from each Paused attempt's end to
    the next attempt's start. Only a trial that ran for less than its span can have any."""
    if trial.start_time is None or trial.end_time is None or trial.wall_seconds is None:
        return []
    if trial.wall_seconds >= trial.end_time - trial.start_time - 1e-9:
        return []
    attempts = store.attempts.of(trial.id)
    return [
        (before.end_time, after.start_time)
        for before, after in itertools.pairwise(attempts)
        if before.status is JobStatus.PAUSED and before.end_time is not None
    ]


def _curve_of(
    trial: TrainingJobRecord,
    points: list[MetricPoint],
    pauses: Sequence[tuple[float, float]] = (),
) -> Curve:
    """Reports are the points that share a step and a moment, in the order they arrived; the
    time a trial spent paused is left out (it ran, and is replayed, without it)."""
    assert trial.start_time is not None  # only started trials are replayed
    began = trial.start_time

    def running(moment: float) -> float:
        paused = sum(max(0.0, min(moment, end) - start) for start, end in pauses)
        return moment - began - paused

    reports: list[CurvePoint] = []
    latest = 0.0
    for point in sorted(points, key=lambda p: (p.time, p.step)):
        seconds = max(latest, running(point.time))
        if reports and reports[-1].step == point.step and reports[-1].seconds == seconds:
            metrics = {**reports[-1].metrics, point.name: point.value}
            reports[-1] = CurvePoint(point.step, seconds, metrics)
        else:
            reports.append(CurvePoint(point.step, seconds, {point.name: point.value}))
        latest = seconds
    ended = running(trial.end_time or began)
    status = trial.status
    reason = None if status is JobStatus.COMPLETED else f"as recorded: {trial.failure_reason}"
    return Curve(
        reports,
        full_resource=_full_resource(trial, reports),
        end_status=status,
        end_reason=reason,
        end_seconds=max(ended, latest),
    )


def _full_resource(trial: TrainingJobRecord, reports: list[CurvePoint]) -> int | None:
    """The algorithm's word where it knows; else a trial that ended by itself shows it."""
    try:
        algorithm = get_algorithm(trial.algorithm)
        known = algorithm.full_resource(algorithm.parse_hyperparameters(trial.hyperparameters))
    except (ValueError, InvalidInputError):
        known = None
    if known is None and trial.status is JobStatus.COMPLETED and trial.failure_reason is None:
        return reports[-1].step if reports else None
    return known


def _gap(parameter: ParameterRange, a: object, b: object) -> float:
    """How far apart two values are, as a fraction of the range (categories: 0 or 1)."""
    distribution = parameter.distribution()
    if isinstance(distribution, CategoricalDistribution) or a is None or b is None:
        return 0.0 if a == b else 1.0
    assert isinstance(distribution, FloatDistribution | IntDistribution)
    low, high = float(distribution.low), float(distribution.high)
    x, y = (float(parameter.to_sample(v)) for v in (a, b))  # type: ignore[arg-type]
    if distribution.log:
        low, high, x, y = (math.log(max(v, 1e-300)) for v in (low, high, x, y))
    return abs(x - y) / (high - low)


def replay_tuning(
    store: Store, tuning_job_id: str, overrides: Sequence[str] = (), *, start_time: float
) -> TuningJobRecord:
    """Run a stored tuning job again in simulated time on its own recorded curves, as it was
    or changed by `--set`-style overrides (another strategy, seed, budget...); the replay is
    a new tuning job in the same store."""
    source = ReplaySource.from_store(store, tuning_job_id)
    raw = source.spec.model_dump(mode="json", exclude_none=True)
    for override in overrides:
        apply_override(raw, override)
    # TOML has no null: another strategy drops the table of the one it replaces.
    if raw.get("strategy") != "Hyperband":
        raw.pop("hyperband", None)
    if raw.get("strategy") != "PBT":
        raw.pop("pbt", None)
    if raw.get("strategy") == "Grid":  # it walks every point: it takes no first ones
        raw.pop("first_configurations", None)
    spec = tuning_spec_from_dict(raw)
    return simulate_tuning(spec, source, store, start_time=start_time)
