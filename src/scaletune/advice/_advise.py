"""Advice for one stored job: which metric is its quality, what it and its probes measured,
and the predictions; the spec of a probe (the same job, shorter, on another size)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scaletune.advice._measure import (
    RunMeasure,
    first_reaching,
    lower_is_better,
    measure_run,
    measure_sizes,
    start_seconds,
)
from scaletune.advice._predict import (
    Advice,
    OverheadModel,
    StepTimeModel,
    elastic_range,
    predict,
)
from scaletune.advice._spot import (
    JobShape,
    SpotAdvice,
    SpotMarket,
    predict_mixes,
    recommend_mix,
)
from scaletune.diagnostics import GNS_METRIC
from scaletune.errors import InvalidInputError
from scaletune.spec import TrainingJobSpec
from scaletune.store import Store, TrainingJobRecord


def quality_metric(record: TrainingJobRecord) -> str:
    """The job's quality by default: its first validation metric, else its first other one."""
    names = sorted(name for name in record.final_metrics if name != GNS_METRIC)
    validation = [name for name in names if name.startswith("validation:")]
    if not (validation or names):
        raise InvalidInputError(f"job {record.id!r} reported no metric to judge its quality by")
    return (validation or names)[0]


def _spec(record: TrainingJobRecord) -> TrainingJobSpec:
    return TrainingJobSpec.model_validate(record.spec)


def _measure(store: Store, record: TrainingJobRecord, metric: str) -> RunMeasure:
    return measure_run(record, store.metrics(record.id, metric), _spec(record).task_count)


def advise_job(
    store: Store,
    job_id: str,
    *,
    metric: str | None = None,
    maximize: bool | None = None,
    probe_ids: Sequence[str] = (),
    max_workers: int | None = None,
    max_cost_ratio: float = 1.5,
    tolerance: float = 0.0,
    market: SpotMarket | None = None,
    max_time_ratio: float = 1.5,
) -> Advice:
    record = store.get_training_job(job_id)
    metric = metric or quality_metric(record)
    if metric not in record.final_metrics:
        raise InvalidInputError(
            f"job {job_id!r} never reported {metric!r}; it reported {sorted(record.final_metrics)}"
        )
    maximize = not lower_is_better(metric) if maximize is None else maximize
    series = store.metrics(job_id, metric)
    spec = _spec(record)
    extra_tasks = spec.task_count - spec.instance_count
    # An elastic run that changed size measured each size: the one it ran longest at is its
    # own, the others count as probes.
    base, *resized = measure_sizes(record, series, store.attempts.of(job_id), extra_tasks)
    quality = series[-1].value
    reached = first_reaching(series, quality, maximize, tolerance)
    assert reached is not None  # its own last value reaches itself
    probes = [*resized, *(_measure(store, store.get_training_job(p), metric) for p in probe_ids)]
    noise_scale, batch = _noise_scale(record, [store.get_training_job(p) for p in probe_ids])
    predictions, recommended, basis = predict(
        base,
        reached.step,
        probes,
        max_workers=max_workers or max(4, 2 * record.instance_count, *(p.workers for p in probes)),
        extra_tasks=extra_tasks,
        noise_scale=noise_scale,
        per_worker_batch=batch,
        max_cost_ratio=max_cost_ratio,
    )
    spot = None
    if market is not None:
        restart = start_seconds(store.attempts.of(job_id), series, base.step_seconds)
        measured = [base, *probes]
        spot = _spot_advice(spec, measured, reached.step, market, max_time_ratio, restart)
    return Advice(
        job_id=job_id,
        metric=metric,
        quality=quality,
        steps_to_quality=reached.step,
        predictions=predictions,
        recommended=recommended,
        max_cost_ratio=max_cost_ratio,
        elastic_range=elastic_range(predictions, recommended, max_cost_ratio),
        basis=[f"{metric} {quality:.6g} first reached at step {reached.step}", *basis],
        probes=list(probe_ids),
        spot=spot,
    )


def _spot_advice(
    spec: TrainingJobSpec,
    measures: Sequence[RunMeasure],
    steps: int,
    market: SpotMarket,
    max_time_ratio: float,
    restart_seconds: float | None,
) -> SpotAdvice:
    """The job at its own size on each mix: its measured step times and what its attempt's
    start cost (else its time outside steps), its checkpoints' interval; an elastic job's
    fewest, or half its size."""
    model = StepTimeModel.fit(measures)
    most = spec.instance_count
    if restart_seconds is None:
        restart_seconds = OverheadModel.fit(measures).at(most)
    fewest = spec.min_workers if spec.elastic else max(1, most // 2)
    every = spec.checkpoint
    if not every.enabled:
        checkpoint_seconds = math.inf
    else:
        by_count = math.inf if every.every_steps is None else every.every_steps * model.at(most)
        checkpoint_seconds = min(every.every_seconds or math.inf, by_count)
    shape = JobShape(steps, model.at, restart_seconds, checkpoint_seconds, most, fewest)
    predictions = predict_mixes(shape, market)
    return SpotAdvice(
        market, fewest, predictions, recommend_mix(predictions, max_time_ratio), max_time_ratio
    )


def _noise_scale(
    record: TrainingJobRecord, probes: Sequence[TrainingJobRecord]
) -> tuple[float | None, int | None]:
    """The gradient noise scale (measured by a run of 2 workers or more: the job's own, else a
    probe's) and the examples a worker's step trains on; None where the algorithm measures
    none or its steps have no batch."""
    from scaletune.algorithms import get_algorithm

    batch = get_algorithm(record.algorithm).examples_per_worker_step(record.hyperparameters)
    if batch is None:
        return None, None
    for run in (record, *probes):
        if GNS_METRIC in run.final_metrics:
            return run.final_metrics[GNS_METRIC], batch
    return None, None


def probe_spec(record: TrainingJobRecord, workers: int, steps: int) -> TrainingJobSpec:
    """The job again on `workers`, cut to `steps` steps: long enough for a step time."""
    from scaletune.algorithms import get_algorithm

    spec = _spec(record)
    name = get_algorithm(spec.algorithm).steps_hyperparameter
    if name is None:
        raise InvalidInputError(
            f"--probe: a {spec.algorithm} job has no step count scaletune can shorten; "
            "run it on another size yourself and pass that job with --probe-job"
        )
    if steps < 3:
        raise InvalidInputError(f"--probe-steps {steps}: a step time needs 3 steps or more")
    raw = spec.model_dump(mode="json")
    raw["instance_count"] = workers
    raw["name"] = f"probe-{workers}w"
    raw["hyperparameters"] = {**raw["hyperparameters"], name: steps}
    return TrainingJobSpec.model_validate(raw)
