"""The report of any stored tuning job (`scaletune report ID`): its summary, its trade-offs
(Pareto front, target), the analytics of every trial and the pictures."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaletune.analysis import (
    ANALYTICS_COLUMNS,
    TrialMarks,
    TuningSummary,
    analytics_rows,
    summarize,
    trial_marks,
)
from scaletune.store import JobStatus, MetricPoint, Store, TrialRow, TuningJobRecord

from . import _figures as figures
from ._report import MISSING, Report, _cell, _csv, _number, _tuning, environment

TABLE_ROWS = 100  # the analytics on the page: every trial, or this many best
# The curves drawn: every trial's up to CURVES_DRAWN, else the best CURVES_BEST and others
# evenly spaced in trial order (100,000 lines draw no better than 2,000, and cost seconds).
CURVES_DRAWN = 2_000
CURVES_BEST = 200


@dataclass(frozen=True)
class CapacityBilling:
    """A tuning job's trials' billable seconds on each capacity class, and the prices of a
    worker-second on each (its training file's, else the store's), if any."""

    seconds: Mapping[str, float]
    prices: Mapping[str, float] | None = None

    def rows(self) -> list[list[str]]:
        """Rows of the summary: shown where any trial ran on spot capacity, or with prices."""
        if not self.seconds or (set(self.seconds) == {"on-demand"} and self.prices is None):
            return []
        seconds = sorted(self.seconds.items())  # on-demand, then spot
        rows = [[f"… on {name}", f"{billed:.1f}"] for name, billed in seconds]
        if self.prices is not None:
            costs = {name: billed * self.prices.get(name, 0.0) for name, billed in seconds}
            apart = ", ".join(f"{name} {cost:.6g}" for name, cost in costs.items())
            rows.append(["cost", f"{sum(costs.values()):.6g} ({apart})"])
        return rows


def drawn_curves(trials: Sequence[TrialRow], maximize: bool) -> list[str] | None:
    """The trials whose curves the report draws, for the store to read (None: every one)."""
    if len(trials) <= CURVES_DRAWN:
        return None
    best = {trial.id for trial in _best(trials, maximize)[:CURVES_BEST]}
    others = [trial.id for trial in trials if trial.id not in best]
    stride = math.ceil(len(others) / (CURVES_DRAWN - len(best)))
    return [*best, *others[::stride]]


def stored_tuning_report(store: Store, tuning_id: str) -> Report:
    """The report of a tuning job in `store`, read as `scaletune report ID` reads it: its
    summary, every trial's row, the curves drawn (`drawn_curves`), marks and billing."""
    summary = summarize(store, tuning_id)
    objective = summary.record.spec_view.objective
    trials = store.trials.rows(tuning_id)
    curves = store.trials.curves(
        tuning_id, objective.metric, job_ids=drawn_curves(trials, objective.maximize)
    )
    billing = CapacityBilling(
        store.trials.billable_by_class(tuning_id),
        summary.record.spec_view.training_prices or store.prices(),
    )
    return tuning_job_report(summary, trials, curves, trial_marks(store, summary.record), billing)


def _best(trials: Sequence[TrialRow], maximize: bool) -> list[TrialRow]:
    """The trials with an objective, the best first."""
    sign = -1.0 if maximize else 1.0
    return sorted(
        (trial for trial in trials if trial.objective is not None),
        key=lambda trial: sign * (trial.objective or 0.0),
    )


def tuning_job_report(
    summary: TuningSummary,
    trials: Sequence[TrialRow],
    curves: Mapping[str, Sequence[MetricPoint]],
    marks: TrialMarks | None = None,
    billing: CapacityBilling | None = None,
) -> Report:
    """The report for any stored tuning job (`scaletune report ID`): every trial in
    analytics.csv and the pictures; on the page, every trial too, or the best
    `TABLE_ROWS` of a large job; with several objectives its Pareto front, with a target
    the cheapest and fastest trials that reached it."""
    record = summary.record
    spec = record.spec_view
    metric, maximize = spec.objective.metric, spec.objective.maximize
    hyperband = spec.hyperband
    rungs = (
        figures.hyperband_rungs(
            hyperband.min_resource, hyperband.max_resource, hyperband.eta, hyperband.brackets
        )
        if spec.strategy == "Hyperband" and hyperband is not None
        else []
    )
    report = Report(
        title=f"Tuning job {record.id}",
        intro=(
            f"{record.strategy} search of {metric} ({spec.objective.type.value}), "
            f"{summary.trial_count} trials, status {record.status.value}."
        ),
    )
    report.tables.append(
        (
            "Summary",
            [
                ["measure", "value"],
                ["best objective", _number(record.best_objective)],
                ["best training job", record.best_training_job or MISSING],
                [
                    "trials",
                    ", ".join(f"{v} {k.lower()}" for k, v in summary.job_counts.items() if v),
                ],
                ["billable worker-seconds", f"{summary.billable_seconds:.1f}"],
                *([] if billing is None else billing.rows()),
                [
                    "billable worker-seconds had no trial been stopped (estimated)",
                    f"{summary.billable_seconds_without_early_stopping:.1f}",
                ],
                ["wall seconds", f"{record.wall_seconds or 0:.1f}"],
                *([["ended", ended]] if (ended := _why_ended(record)) else []),
            ],
            "",
        )
    )
    report.tables += _trade_off_tables(summary)
    analytics = analytics_rows(record, list(trials), marks)
    report.files["analytics.csv"] = _csv(analytics, [*spec.tuned, *ANALYTICS_COLUMNS])
    shown, note = analytics, "Every training job is in analytics.csv."
    if len(analytics) > TABLE_ROWS:
        sign = 1.0 if maximize else -1.0
        shown = sorted(
            (row for row in analytics if row["FinalObjectiveValue"] is not None),
            key=lambda row: -sign * row["FinalObjectiveValue"],
        )[:TABLE_ROWS]
        note = f"The {len(shown)} best of {len(analytics)}; every training job is in analytics.csv."
    columns = [
        c
        for c in [*spec.tuned, *ANALYTICS_COLUMNS]
        if c not in ("TrainingStartTime", "TrainingEndTime")
    ]
    rows = [list(columns)] + [[_cell(row.get(c)) for c in columns] for row in shown]
    report.tables.append(("Training jobs (analytics)", rows, note))
    report.pictures += [
        (
            "tuning-trials.png",
            (
                f"Every trial's {metric}"
                if len(curves) >= len(trials)
                else f"{len(curves):,} of {len(trials):,} trials' {metric} (the best "
                f"{CURVES_BEST}, the others evenly spaced; every trial is in analytics.csv)"
            )
            + "; x marks where a trial was stopped.",
            figures.tuning_trials(
                trials, curves, metric, "step", rungs, f"{record.strategy} tuning", maximize
            ),
        ),
        (
            "cost-vs-best.png",
            "Best objective so far against billable worker-seconds spent.",
            figures.cost_against_quality({record.strategy: trials}, metric, None, maximize),
        ),
    ]
    if summary.pareto_front:
        quality, cost = (o.metric for o in spec.objectives[:2])
        front = [
            (p.values[cost], p.values[quality], p.instance_count) for p in summary.pareto_front
        ]
        # The other completed trials where the cost is one of theirs (a reported metric is
        # known for the front alone).
        others = [
            (getattr(t, cost), t.objective)
            for t in trials
            if cost in ("billable_seconds", "wall_seconds")
            and t.status is JobStatus.COMPLETED
            and t.objective is not None
            and getattr(t, cost) is not None
        ]
        report.pictures.append(
            (
                "pareto-front.png",
                f"{quality} against {cost}: the Pareto front (each point labelled with its "
                "workers), and the other completed trials.",
                figures.pareto_front(front, others, (cost, quality), maximize),
            )
        )
    report.configuration = {"tuning_job": record.spec, "environment": environment()}
    # The JSON, as the page: every trial, or the best TABLE_ROWS (all are in analytics.csv).
    listed = trials if len(trials) <= TABLE_ROWS else _best(trials, maximize)[:TABLE_ROWS]
    report.data = {"summary": _tuning(summary, listed)}
    return report


def _trade_off_tables(summary: TuningSummary) -> list[tuple[str, list[list[str]], str]]:
    """The Pareto front, and who reached the target at least cost and soonest."""
    tables = []
    spec = summary.record.spec_view
    tuned = spec.tuned_hyperparameters
    if summary.pareto_front is not None:
        names = [o.metric for o in spec.objectives]
        header = ["training job", "workers", *names, *tuned]
        rows = [
            [
                point.job_id,
                str(point.instance_count),
                *(_number(point.values.get(name)) for name in names),
                *(_cell(point.hyperparameters.get(name)) for name in tuned),
            ]
            for point in summary.pareto_front
        ]
        constraints = spec.constraints
        note = f"{len(rows)} completed trials that no other beats on every objective" + (
            ", among those that meet the constraints." if constraints else "."
        )
        tables.append(("Pareto front", [header, *rows], note))
    if summary.target is not None:
        target = summary.target
        header = ["choice", "training job", "workers", "billable worker-seconds", "wall seconds"]
        rows = [
            [
                label,
                point.job_id,
                str(point.instance_count),
                _number(point.values.get("billable_seconds")),
                _number(point.values.get("wall_seconds")),
            ]
            for label, point in (("cheapest", target.cheapest), ("fastest", target.fastest))
            if point is not None
        ]
        note = (
            f"{target.reached} trials reached {target.metric} = {target.target:g}."
            if target.reached
            else f"No trial reached {target.metric} = {target.target:g}."
        )
        tables.append(("Target", [header, *rows], note))
    return tables


def _why_ended(record: TuningJobRecord) -> str | None:
    """Why it failed or was stopped, else why it completed when it did."""
    return record.failure_reason or record.completion_reason
