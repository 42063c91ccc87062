"""Run the convergence experiment: static jobs, two tuning jobs, the tuned job retrained."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaletune.analysis import TuningSummary, summarize
from scaletune.api import Session
from scaletune.spec import training_spec_from_dict, tuning_spec_from_dict
from scaletune.store import MetricPoint, TrainingJobRecord, TrialRow
from scaletune.tuning import TuningController, TuningProgress

from ._plans import ExperimentPlan


@dataclass(frozen=True)
class ExperimentProgress:
    """For a live display: which phase, how many of its jobs are done and running."""

    phase: str
    phase_number: int
    phases: int
    jobs_done: int
    jobs_running: int
    jobs_total: int
    best: float | None


@dataclass(frozen=True)
class StaticRun:
    workers: int
    record: TrainingJobRecord
    curve: list[MetricPoint]  # the objective metric, per step


@dataclass(frozen=True)
class TuningRun:
    label: str
    summary: TuningSummary
    trials: list[TrialRow]  # in the order they were proposed
    curves: dict[str, list[MetricPoint]]  # trial id -> its objective per step


@dataclass(frozen=True)
class TransferRun:
    """One worker's settings on N workers without tuning there, and Hyperband's best on one
    worker carried to N the same way (`ExperimentPlan.transfer`)."""

    label: str
    one_worker_settings: StaticRun  # the naive settings on N workers, carried
    tuning: TuningRun  # Hyperband on one worker
    transferred: StaticRun  # its best settings on N workers, carried


@dataclass(frozen=True)
class ExperimentResult:
    plan: ExperimentPlan
    workers: int  # the cluster size that is tuned
    seed: int
    static: dict[int, StaticRun]  # cluster size -> the naive settings' job
    hyperband: TuningRun
    without_early_stopping: TuningRun
    tuned: StaticRun  # the best Hyperband configuration, retrained on `workers`
    wall_seconds: float
    transfer: TransferRun | None = None


ProgressCallback = Callable[[ExperimentProgress], None]


def run_convergence(
    session: Session,
    plan: ExperimentPlan,
    sizes: list[int],
    *,
    seed: int = 0,
    on_progress: ProgressCallback | None = None,
) -> ExperimentResult:
    """`sizes`: the cluster sizes to run the naive settings on (1 is always added); the
    largest is the one tuned."""
    started = time.monotonic()
    report = on_progress or (lambda progress: None)
    sizes = sorted({1, *sizes})
    workers = sizes[-1]
    phases = len(sizes) + 3 + (3 if plan.transfer is not None else 0)

    def static(
        phase: int,
        label: str,
        size: int,
        hyperparameters: dict[str, Any],
        distribution: dict[str, Any] | None = None,
    ) -> StaticRun:
        report(ExperimentProgress(label, phase, phases, 0, 1, 1, None))
        spec = training_spec_from_dict(
            _training(plan, size, hyperparameters, seed, distribution or plan.distribution)
        )
        record = session.controller.run(session.controller.prepare(spec))
        score = record.final_metrics.get(plan.objective_metric)
        report(ExperimentProgress(label, phase, phases, 1, 0, 1, score))
        return StaticRun(size, record, session.store.metrics(record.id, plan.objective_metric))

    runs = {
        size: static(number, f"naive settings on {size} worker(s)", size, plan.hyperparameters)
        for number, size in enumerate(sizes, start=1)
    }
    # The tuning jobs find their workers warm: they run up to this many at once.
    session.backend.prestart(min(plan.max_parallel_jobs * workers, 16))
    tuning_phases: tuple[tuple[str, dict[str, Any]], ...] = (
        ("Hyperband", {"strategy": "Hyperband", "hyperband": _hyperband(plan)}),
        (f"{plan.searcher} search without early stopping", {"strategy": plan.searcher}),
    )
    tunings = []
    for offset, (label, strategy) in enumerate(tuning_phases, start=len(sizes) + 1):
        tunings.append(
            _tune(session, plan, workers, seed, f"{label} tuning", offset, phases, strategy, report)
        )
    hyperband, plain = tunings
    best = hyperband.summary.best
    # If every trial failed, the naive settings are retrained (the report shows the failures).
    best_hyperparameters = plan.hyperparameters if best is None else best.hyperparameters
    tuned = static(
        len(sizes) + 3, f"best tuned settings on {workers} worker(s)", workers, best_hyperparameters
    )
    transfer = None
    if plan.transfer is not None:
        carry = plan.transfer
        phase = len(sizes) + 4
        one_worker_settings = static(
            phase,
            f"naive settings on {workers} workers with {carry.label}",
            workers,
            {**plan.hyperparameters, **carry.hyperparameters},
            carry.distribution,
        )
        tuning = _tune(
            session,
            plan,
            1,
            seed,
            "Hyperband tuning on 1 worker",
            phase + 1,
            phases,
            {"strategy": "Hyperband", "hyperband": _hyperband(plan)},
            report,
            carry.distribution,
        )
        best_on_one = tuning.summary.best
        transferred = static(
            phase + 2,
            f"best settings of 1 worker on {workers} workers with {carry.label}",
            workers,
            {
                **(plan.hyperparameters if best_on_one is None else best_on_one.hyperparameters),
                **carry.hyperparameters,
            },
            carry.distribution,
        )
        transfer = TransferRun(carry.label, one_worker_settings, tuning, transferred)
    return ExperimentResult(
        plan=plan,
        workers=workers,
        seed=seed,
        static=runs,
        hyperband=hyperband,
        without_early_stopping=plain,
        tuned=tuned,
        wall_seconds=time.monotonic() - started,
        transfer=transfer,
    )


def _training(
    plan: ExperimentPlan,
    size: int,
    hyperparameters: dict[str, Any],
    seed: int,
    distribution: dict[str, Any],
) -> dict[str, Any]:
    return {
        "algorithm": plan.algorithm,
        "instance_count": size,
        "hyperparameters": hyperparameters,
        "distribution": distribution,
        "channels": plan.channels,
        "seed": seed,
    }


def _hyperband(plan: ExperimentPlan) -> dict[str, Any]:
    return {
        "min_resource": plan.min_resource,
        "max_resource": plan.max_resource,
        "eta": plan.eta,
        "searcher": plan.searcher,
    }


def _tune(
    session: Session,
    plan: ExperimentPlan,
    workers: int,
    seed: int,
    label: str,
    phase: int,
    phases: int,
    strategy: dict[str, Any],
    report: ProgressCallback,
    distribution: dict[str, Any] | None = None,
) -> TuningRun:
    spec = tuning_spec_from_dict(
        {
            "objective_metric": plan.objective_metric,
            "objective_type": "Maximize",
            "ranges": plan.ranges,
            "max_jobs": plan.max_jobs,
            "max_parallel_jobs": plan.max_parallel_jobs,
            "early_stopping": "Off",
            "seed": seed,
            **strategy,
            "training": _training(
                plan, workers, plan.hyperparameters, seed, distribution or plan.distribution
            ),
        }
    )

    def show(progress: TuningProgress) -> None:
        done = progress.completed + progress.stopped + progress.failed
        report(
            ExperimentProgress(
                label, phase, phases, done, progress.running, progress.max_jobs, progress.best
            )
        )

    controller = TuningController(session.controller, on_progress=show)
    tuning_id = controller.create(spec)
    controller.run(tuning_id, spec)
    summary = summarize(session.store, tuning_id)
    trials = session.store.trials.rows(tuning_id)
    return TuningRun(
        label, summary, trials, session.store.trials.curves(tuning_id, plan.objective_metric)
    )
