"""The experiment's tables (Markdown, JSON) and its self-contained HTML report (rendered from
`views`' report.html). Past 400 lines: the convergence experiment's report and a tuning job's
share every table helper here; splitting them is due when a third report comes."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from scaletune.spec._names import CLUSTER_SIZE
from scaletune.store import MetricPoint, TrainingJobRecord, TrialRow
from scaletune.tuning import ANALYTICS_COLUMNS, TrialMarks, TuningSummary, analytics_rows

from . import _figures as figures
from ._runner import ExperimentResult, StaticRun

Table = list[list[str]]  # first row: the header
TABLE_ROWS = 100  # a tuning job's analytics on the page: every trial, or this many best
MISSING = "–"  # noqa: RUF001  # an en dash marks a figure that does not exist


@dataclass
class Report:
    """What a report holds; written as report.html, results.md, results.json and PNGs."""

    title: str
    intro: str
    command: str | None = None  # the command line that made it, shown at the top
    tables: list[tuple[str, Table, str]] = field(default_factory=list)  # title, rows, note
    pictures: list[tuple[str, str, bytes]] = field(default_factory=list)  # file, caption, png
    configuration: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)  # the figures, as JSON
    files: dict[str, str] = field(default_factory=dict)  # more files by name (a CSV)

    def write(self, folder: Path) -> Path:
        """Write every file; the HTML last (and atomically), so its presence means done."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, _, png in self.pictures:
            (folder / name).write_bytes(png)
        for name, text in self.files.items():
            (folder / name).write_text(text)
        payload = {
            "title": self.title,
            "command": self.command,
            "configuration": self.configuration,
            **self.data,
        }
        (folder / "results.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
        (folder / "results.md").write_text(self.markdown())
        partial = folder / ".report.html.partial"
        partial.write_text(self.html())
        partial.replace(folder / "report.html")
        return folder / "report.html"

    def markdown(self) -> str:
        lines = [f"# {self.title}", "", self.intro, ""]
        if self.command:
            lines += [f"Command: `{self.command}`", "", _machine_line(), ""]
        for title, rows, note in self.tables:
            lines += [f"## {title}", "", *_markdown_table(rows), ""]
            if note:
                lines += [note, ""]
        for name, caption, _ in self.pictures:
            lines += [f"![{caption}]({name})", "", f"*{caption}*", ""]
        lines += [
            "## Configuration",
            "",
            "```json",
            json.dumps(self.configuration, indent=2, default=str),
            "```",
            "",
        ]
        return "\n".join(lines)

    def html(self) -> str:
        """One self-contained page from the console's templates (report.html)."""
        from scaletune.views import render, stylesheet  # Jinja2: only when a page is written

        pictures = [
            {"file": name, "caption": caption, "encoded": base64.b64encode(png).decode()}
            for name, caption, png in self.pictures
        ]
        return render(
            "report.html",
            report=self,
            pictures=pictures,
            machine=_machine_line() if self.command else None,
            configuration=json.dumps(self.configuration, indent=2, default=str),
            stylesheet=stylesheet(),
        )


def _cell(value: object) -> str:
    if value is None or value != value:  # None or NaN
        return MISSING
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _csv(rows: Sequence[Mapping[str, object]], columns: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(
        buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n"
    )
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _markdown_table(rows: Table) -> list[str]:
    header, *body = rows
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(row) + " |" for row in body],
    ]


def environment() -> dict[str, Any]:
    packages: dict[str, str | None] = {}
    for name in ("scaletune", "torch", "xgboost-cpu", "optuna", "numpy", "matplotlib"):
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "packages": packages,
    }


def _machine_line() -> str:
    machine = environment()
    return (
        f"Machine: {machine['cpus']} CPUs, {machine['platform']}, Python {machine['python']}, "
        f"{machine['date']}."
    )


def _number(value: float | None, digits: int = 4) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def _change(before: float | None, after: float | None, *, less_is_better: bool) -> str:
    if before is None or after is None or before == 0:
        return MISSING
    change = (after - before) / before * 100
    if less_is_better:
        return f"{-change:.0f} % less" if change <= 0 else f"{change:.0f} % more"
    return f"{change:+.0f} %"


def _score(run: StaticRun, metric: str) -> float | None:
    return run.record.final_metrics.get(metric)


def convergence_report(result: ExperimentResult) -> Report:
    plan, n = result.plan, result.workers
    reference = plan.reference
    metric, label = plan.objective_metric, plan.metric_label
    one, many = result.static[1], result.static[n]
    hyperband, plain = result.hyperband.summary, result.without_early_stopping.summary
    step_name = "epoch" if plan.algorithm.value == "dnn" else "boosting round"
    dataset = plan.dataset.value + (f" ({plan.dataset_file})" if plan.dataset_file else "")
    report = Report(
        title=f"Convergence experiment: {plan.algorithm.value} on {plan.dataset.value}, "
        f"1 vs {n} workers",
        intro=(
            f"The same {plan.algorithm.value} job with the same (naive, one-worker) settings on "
            f"1 and {n} workers, then a Hyperband tuning job for the {n}-worker job, the same "
            f"search without early stopping, and the best tuned settings retrained on {n} "
            f"workers and scored on the held-out test set. Data: {dataset}. Seed "
            f"{result.seed}. Whole experiment: {result.wall_seconds:.0f} s."
        ),
    )
    ref_unit = "min"
    report.tables.append(
        (
            "Scaling out with the same settings",
            [
                [
                    "measure",
                    "reference, 1 instance",
                    f"reference, {reference.workers} instances",
                    "scaletune, 1 worker",
                    f"scaletune, {n} workers",
                ],
                [
                    "training time",
                    f"{reference.training_minutes[0]:g} {ref_unit}",
                    f"{reference.training_minutes[1]:g} {ref_unit}",
                    f"{one.record.wall_seconds or 0:.1f} s",
                    f"{many.record.wall_seconds or 0:.1f} s",
                ],
                [
                    f"final validation {label}",
                    f"{reference.validation[0]:.2f}",
                    f"{reference.validation[1]:.2f}",
                    _number(_score(one, metric)),
                    _number(_score(many, metric)),
                ],
                [
                    f"test {label}",
                    MISSING,
                    MISSING,
                    _number(_score(one, plan.test_metric)),
                    _number(_score(many, plan.test_metric)),
                ],
            ],
            _scaling_note(result),
        )
    )
    naive = _score(many, metric)
    ref_quality = reference.tuning_quality
    ref_cost = reference.tuning_billable_minutes
    ref_wall = reference.tuning_wall_minutes
    report.tables.append(
        (
            f"Tuning the {n}-worker job",
            [
                [
                    "measure",
                    "reference: without tuning / naive",
                    "reference: Hyperband",
                    "reference: improvement",
                    "scaletune: without tuning / no early stopping",
                    "scaletune: Hyperband",
                    "scaletune: improvement",
                ],
                [
                    f"model quality (validation {label})",
                    *(_reference_pair(ref_quality, digits=2, less_is_better=False)),
                    _number(naive),
                    _number(hyperband.record.best_objective),
                    _change(naive, hyperband.record.best_objective, less_is_better=False),
                ],
                [
                    "cost (billable worker-seconds; reference: minutes)",
                    *(_reference_pair(ref_cost, digits=0, less_is_better=True)),
                    f"{plain.billable_seconds:.0f}",
                    f"{hyperband.billable_seconds:.0f}",
                    _change(
                        plain.billable_seconds, hyperband.billable_seconds, less_is_better=True
                    ),
                ],
                [
                    "run time (wall seconds; reference: minutes)",
                    *(_reference_pair(ref_wall, digits=0, less_is_better=True)),
                    f"{plain.record.wall_seconds or 0:.0f}",
                    f"{hyperband.record.wall_seconds or 0:.0f}",
                    _change(
                        plain.record.wall_seconds,
                        hyperband.record.wall_seconds,
                        less_is_better=True,
                    ),
                ],
                [
                    f"tuned settings retrained on {n} workers: test {label}",
                    MISSING,
                    MISSING,
                    MISSING,
                    _number(_score(many, plan.test_metric)),
                    _number(_score(result.tuned, plan.test_metric)),
                    _change(
                        _score(many, plan.test_metric),
                        _score(result.tuned, plan.test_metric),
                        less_is_better=False,
                    ),
                ],
            ],
            _tuning_note(result),
        )
    )
    if len(result.static) > 2:
        rows = [["workers", f"validation {label}", f"test {label}", "wall s", "billable worker-s"]]
        for size, run in sorted(result.static.items()):
            rows.append(
                [
                    str(size),
                    _number(_score(run, metric)),
                    _number(_score(run, plan.test_metric)),
                    f"{run.record.wall_seconds or 0:.1f}",
                    f"{run.record.billable_seconds or 0:.1f}",
                ]
            )
        report.tables.append(("Cluster size, same settings", rows, ""))
    curves = {f"naive, {size} worker(s)": run.curve for size, run in result.static.items()}
    curves[f"tuned, {n} workers"] = result.tuned.curve
    rungs = figures.hyperband_rungs(plan.min_resource, plan.max_resource, plan.eta)
    report.pictures += [
        (
            "learning-curves.png",
            f"Validation {label} per {step_name}: naive settings on each cluster size, and the "
            f"best tuned settings on {n} workers.",
            figures.learning_curves(curves, metric, step_name),
        ),
        (
            "tuning-trials.png",
            f"Every Hyperband trial's validation {label}; x marks where a trial was stopped, "
            "dashed lines the rungs where trials are compared.",
            figures.tuning_trials(
                result.hyperband.trials,
                result.hyperband.curves,
                metric,
                step_name,
                rungs,
                f"Hyperband tuning, {n} workers per trial",
            ),
        ),
        (
            "cost-vs-best.png",
            "Best validation score so far against billable worker-seconds spent: Hyperband vs "
            "the same search without early stopping.",
            figures.cost_against_quality(
                {
                    "Hyperband": result.hyperband.trials,
                    "no early stopping": result.without_early_stopping.trials,
                },
                metric,
                naive,
            ),
        ),
    ]
    if len(result.static) > 2:
        sizes = sorted(result.static)
        report.pictures.append(
            (
                "cluster-size.png",
                f"Validation {label} and wall time against cluster size, same settings.",
                figures.cluster_size(
                    sizes,
                    [_score(result.static[s], metric) or 0.0 for s in sizes],
                    [result.static[s].record.wall_seconds or 0.0 for s in sizes],
                    metric,
                ),
            )
        )
    report.configuration = {
        "algorithm": plan.algorithm.value,
        "dataset": plan.dataset.value,
        "dataset_file": str(plan.dataset_file) if plan.dataset_file else None,
        "workers": n,
        "cluster_sizes": sorted(result.static),
        "seed": result.seed,
        "naive_hyperparameters": plan.hyperparameters,
        "distribution": plan.distribution,
        "objective": {"metric": metric, "type": "Maximize"},
        "ranges": plan.ranges,
        "hyperband": {
            "min_resource": plan.min_resource,
            "max_resource": plan.max_resource,
            "eta": plan.eta,
            "searcher": plan.searcher,
        },
        "max_jobs": plan.max_jobs,
        "max_parallel_jobs": plan.max_parallel_jobs,
        "environment": environment(),
    }
    report.data = {
        "static": {str(size): _record(run.record) for size, run in result.static.items()},
        "hyperband": _tuning(hyperband, result.hyperband.trials),
        "without_early_stopping": _tuning(plain, result.without_early_stopping.trials),
        "tuned": _record(result.tuned.record),
        "wall_seconds": result.wall_seconds,
        "tables": {title: rows for title, rows, _ in report.tables},
    }
    return report


def _reference_pair(
    pair: tuple[float, float] | None, *, digits: int, less_is_better: bool
) -> list[str]:
    if pair is None:
        return [MISSING, MISSING, MISSING]
    return [
        f"{pair[0]:.{digits}f}",
        f"{pair[1]:.{digits}f}",
        _change(pair[0], pair[1], less_is_better=less_is_better),
    ]


def _scaling_note(result: ExperimentResult) -> str:
    metric = result.plan.objective_metric
    one = _score(result.static[1], metric)
    many = _score(result.static[result.workers], metric)
    if one is None or many is None:
        return "A static job did not report the objective; see its logs."
    drop = one - many
    ref = result.plan.reference.validation
    if abs(drop) < 0.005:
        verdict = (
            f"Here {result.workers} workers keep validation {result.plan.metric_label} within "
            f"0.005 of 1 worker (change {round(many - one, 4) + 0.0:+.4f}); the reference lost "
            f"{ref[0] - ref[1]:.2f}."
        )
    else:
        verdict = (
            f"Here {result.workers} workers lose {drop:.4f} of validation "
            f"{result.plan.metric_label}; the reference lost {ref[0] - ref[1]:.2f}."
        )
    return (
        verdict + " Wall times include starting the workers; on a 2-core machine more "
        "workers share the same cores."
    )


def _tuning_note(result: ExperimentResult) -> str:
    hyperband = result.hyperband.summary
    counts = ", ".join(f"{v} {k.lower()}" for k, v in hyperband.job_counts.items() if v)
    return (
        f"Hyperband ran {sum(hyperband.job_counts.values())} trials ({counts}); both "
        f"searches propose with {result.plan.searcher} from seed {result.seed}, so they "
        "try comparable configurations; the difference in cost is early stopping."
    )


def _record(record: TrainingJobRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "status": record.status.value,
        "instance_count": record.instance_count,
        "hyperparameters": record.hyperparameters,
        "final_metrics": record.final_metrics,
        "wall_seconds": record.wall_seconds,
        "billable_seconds": record.billable_seconds,
    }


def _tuning(summary: TuningSummary, trials: Sequence[TrialRow]) -> dict[str, Any]:
    return {
        **summary.to_json_dict(),
        "trials": [
            {
                "id": trial.id,
                "status": trial.status.value,
                "instance_count": trial.instance_count,
                "hyperparameters": trial.hyperparameters,
                "wall_seconds": trial.wall_seconds,
                "billable_seconds": trial.billable_seconds,
                "objective": trial.objective,
                "resource": trial.resource,
            }
            for trial in trials
        ],
    }


def tuning_job_report(
    summary: TuningSummary,
    trials: Sequence[TrialRow],
    curves: Mapping[str, Sequence[MetricPoint]],
    marks: TrialMarks | None = None,
) -> Report:
    """The report for any stored tuning job (`scaletune report ID`): every trial in
    analytics.csv and the pictures; on the page, every trial too, or the best
    `TABLE_ROWS` of a large job; with several objectives its Pareto front, with a target
    the cheapest and fastest trials that reached it."""
    record = summary.record
    spec = record.spec
    metric = str(spec.get("objective_metric"))
    maximize = spec.get("objective_type") != "Minimize"
    hyperband = spec.get("hyperband") or {}
    rungs = (
        figures.hyperband_rungs(
            int(hyperband["min_resource"]),
            int(hyperband["max_resource"]),
            int(hyperband.get("eta", 3)),
            hyperband.get("brackets"),
        )
        if str(spec.get("strategy")) == "Hyperband" and hyperband
        else []
    )
    report = Report(
        title=f"Tuning job {record.id}",
        intro=(
            f"{record.strategy} search of {metric} ({spec.get('objective_type')}), "
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
                [
                    "billable worker-seconds had no trial been stopped (estimated)",
                    f"{summary.billable_seconds_without_early_stopping:.1f}",
                ],
                ["wall seconds", f"{record.wall_seconds or 0:.1f}"],
            ],
            "",
        )
    )
    report.tables += _trade_off_tables(summary)
    analytics = analytics_rows(record, list(trials), marks)
    report.files["analytics.csv"] = _csv(analytics, [*spec.get("ranges", {}), *ANALYTICS_COLUMNS])
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
        for c in [*spec.get("ranges", {}), *ANALYTICS_COLUMNS]
        if c not in ("TrainingStartTime", "TrainingEndTime")
    ]
    rows = [list(columns)] + [[_cell(row.get(c)) for c in columns] for row in shown]
    report.tables.append(("Training jobs (analytics)", rows, note))
    report.pictures += [
        (
            "tuning-trials.png",
            f"Every trial's {metric}; x marks where a trial was stopped.",
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
        objectives = [str(o["metric"]) for o in spec.get("objectives", [])]
        report.pictures.append(
            (
                "pareto-front.png",
                f"{objectives[0]} against {objectives[1]}: the Pareto front (each point "
                "labelled with its workers), and the other completed trials.",
                figures.pareto_front(summary.pareto_front, trials, objectives[:2], maximize),
            )
        )
    report.configuration = {"tuning_job": spec, "environment": environment()}
    report.data = {"summary": _tuning(summary, trials)}
    return report


def _trade_off_tables(summary: TuningSummary) -> list[tuple[str, list[list[str]], str]]:
    """The Pareto front, and who reached the target at least cost and soonest."""
    tables = []
    tuned = [n for n in summary.record.spec.get("ranges", {}) if n != CLUSTER_SIZE]
    if summary.pareto_front is not None:
        names = [str(o["metric"]) for o in summary.record.spec.get("objectives", [])]
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
        constraints = summary.record.spec.get("constraints") or []
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
