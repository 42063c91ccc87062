"""The experiment report's transfer section: tuned on one worker and carried to N (with
AdaScale for the classifier) against a tuning job on N, in quality and total billable cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scaletune.store import JobStatus

from ._report import _number, _record, _tuning
from ._runner import ExperimentResult, StaticRun, TransferRun


@dataclass(frozen=True)
class Approach:
    name: str
    tuning_seconds: float
    run: StaticRun

    @property
    def total_seconds(self) -> float:
        return self.tuning_seconds + (self.run.record.billable_seconds or 0.0)


def approaches(result: ExperimentResult, transfer: TransferRun) -> list[Approach]:
    n = result.workers
    return [
        Approach(f"one worker's settings on {n} workers, no tuning", 0.0, result.static[n]),
        Approach(
            f"Hyperband on {n} workers, its best retrained on {n}",
            result.hyperband.summary.billable_seconds,
            result.tuned,
        ),
        Approach(
            f"one worker's settings on {n} workers with {transfer.label}, no tuning",
            0.0,
            transfer.one_worker_settings,
        ),
        Approach(
            f"Hyperband on 1 worker, its best on {n} workers with {transfer.label}",
            transfer.tuning.summary.billable_seconds,
            transfer.transferred,
        ),
    ]


def transfer_table(
    result: ExperimentResult, transfer: TransferRun
) -> tuple[str, list[list[str]], str]:
    plan, label = result.plan, result.plan.metric_label
    rows = [
        [
            "approach",
            "tuning worker-s",
            "final run worker-s",
            "total billable worker-s",
            f"validation {label}",
            f"test {label}",
        ]
    ]
    listed = approaches(result, transfer)
    for approach in listed:
        metrics = approach.run.record.final_metrics
        rows.append(
            [
                approach.name,
                f"{approach.tuning_seconds:.0f}",
                f"{approach.run.record.billable_seconds or 0:.0f}",
                f"{approach.total_seconds:.0f}",
                _number(metrics.get(plan.objective_metric)),
                _number(metrics.get(plan.test_metric)),
            ]
        )
    tuned_on_n, carried = listed[1], listed[3]
    quality = [a.run.record.final_metrics.get(plan.test_metric) for a in (tuned_on_n, carried)]
    if None in quality or tuned_on_n.total_seconds == 0:
        verdict = "A run did not report the test metric; see its logs."
    else:
        assert quality[0] is not None and quality[1] is not None
        verdict = (
            f"Tuned on 1 worker and carried to {result.workers}: test {label} "
            f"{quality[1] - quality[0]:+.4f} against tuning on {result.workers}, at "
            f"{carried.total_seconds / tuned_on_n.total_seconds:.2f}x its total billable cost."
        )
    note = (
        f"{verdict} The tuning on {result.workers} workers uses the experiment's server "
        f"({plan.distribution.get('strategy')}, {plan.distribution.get('mode', 'sync')}); the "
        f"carried runs use {transfer.label} on synchronous all-reduce, where the learning "
        "rate follows the gradient noise measured on N workers."
    )
    return (f"Tuned on 1 worker, carried to {result.workers} with {transfer.label}", rows, note)


def transfer_runs(
    result: ExperimentResult, transfer: TransferRun
) -> dict[str, tuple[int, float, float]]:
    """The transfer's completed runs for the quality-cost front: workers, billable, score."""
    metric = result.plan.objective_metric
    runs: dict[str, tuple[int, float, float]] = {}
    for name, run in (
        (
            f"naive settings with {transfer.label}, {result.workers} workers",
            transfer.one_worker_settings,
        ),
        (f"tuned on 1 worker, {transfer.label} on {result.workers}", transfer.transferred),
    ):
        score = run.record.final_metrics.get(metric)
        if score is not None:
            runs[name] = (run.workers, run.record.billable_seconds or 0.0, score)
    for trial in transfer.tuning.trials:
        if trial.status is JobStatus.COMPLETED and trial.objective is not None:
            runs[f"{transfer.tuning.label} trial {trial.trial_number}"] = (
                trial.instance_count,
                trial.billable_seconds or 0.0,
                trial.objective,
            )
    return runs


def transfer_data(transfer: TransferRun) -> dict[str, Any]:
    return {
        "label": transfer.label,
        "one_worker_settings": _record(transfer.one_worker_settings.record),
        "tuning_on_one_worker": _tuning(transfer.tuning.summary, transfer.tuning.trials),
        "transferred": _record(transfer.transferred.record),
    }
