"""The convergence experiment's report: scaling out with the same settings, tuning the
scaled-out job, settings carried from one worker (`_transfer_report`), quality against
billable cost over every run, and their pictures."""

from __future__ import annotations

from scaletune.algorithms import get_algorithm
from scaletune.analysis._pareto import Direction, pareto_front
from scaletune.store import JobStatus

from . import _figures as figures
from ._report import (
    MISSING,
    Report,
    _change,
    _number,
    _record,
    _tuning,
    environment,
)
from ._runner import ExperimentResult, StaticRun
from ._transfer_report import transfer_data, transfer_runs, transfer_table


def _score(run: StaticRun, metric: str) -> float | None:
    return run.record.final_metrics.get(metric)


def convergence_report(result: ExperimentResult) -> Report:
    plan, n = result.plan, result.workers
    reference = plan.reference
    metric, label = plan.objective_metric, plan.metric_label
    one, many = result.static[1], result.static[n]
    hyperband, plain = result.hyperband.summary, result.without_early_stopping.summary
    step_name = get_algorithm(plan.algorithm).step_name
    dataset = plan.dataset.value + (f" ({plan.dataset_file})" if plan.dataset_file else "")
    report = Report(
        title=f"Convergence experiment: {plan.algorithm} on {plan.dataset.value}, 1 vs {n} workers",
        intro=(
            f"The same {plan.algorithm} job with the same (naive, one-worker) settings on "
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
    transfer = result.transfer
    if transfer is not None:
        report.tables.append(transfer_table(result, transfer))
    front_table, front_picture = _quality_cost_front(result)
    report.tables.append(front_table)
    curves = {f"naive, {size} worker(s)": run.curve for size, run in result.static.items()}
    curves[f"tuned, {n} workers"] = result.tuned.curve
    if transfer is not None:
        curves[f"naive, {transfer.label}, {n} workers"] = transfer.one_worker_settings.curve
        curves[f"tuned on 1, {transfer.label}, {n} workers"] = transfer.transferred.curve
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
    if front_picture is not None:
        report.pictures.append(front_picture)
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
        "algorithm": plan.algorithm,
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
        "transfer": None if transfer is None else transfer_data(transfer),
        "wall_seconds": result.wall_seconds,
        "tables": {title: rows for title, rows, _ in report.tables},
    }
    return report


def _quality_cost_front(
    result: ExperimentResult,
) -> tuple[tuple[str, list[list[str]], str], tuple[str, str, bytes] | None]:
    """Quality against billable cost over every run of the experiment (the naive settings on
    each cluster size, every completed trial of both tuning jobs, the tuned retrain): which
    of them no other run beats on both, as a table and a picture."""
    plan, label = result.plan, result.plan.metric_label
    runs: dict[str, tuple[int, float, float]] = {}  # name -> workers, billable, score
    for size, run in sorted(result.static.items()):
        score = _score(run, plan.objective_metric)
        if score is not None and run.record.billable_seconds is not None:
            runs[f"naive settings, {size} worker(s)"] = (size, run.record.billable_seconds, score)
    for tuning in (result.hyperband, result.without_early_stopping):
        for trial in tuning.trials:
            if trial.status is JobStatus.COMPLETED and trial.objective is not None:
                runs[f"{tuning.label} trial {trial.trial_number}"] = (
                    trial.instance_count,
                    trial.billable_seconds or 0.0,
                    trial.objective,
                )
    tuned_score = _score(result.tuned, plan.objective_metric)
    if tuned_score is not None:
        runs[f"tuned settings retrained, {result.workers} workers"] = (
            result.workers,
            result.tuned.record.billable_seconds or 0.0,
            tuned_score,
        )
    if result.transfer is not None:
        runs |= transfer_runs(result, result.transfer)
    directions = [Direction(plan.objective_metric, True), Direction("billable_seconds", False)]
    on_front = pareto_front({k: (v[2], v[1]) for k, v in runs.items()}, directions)
    rows = [["run", "workers", f"validation {label}", "billable worker-s"]] + [
        [name, str(runs[name][0]), _number(runs[name][2]), f"{runs[name][1]:.1f}"]
        for name in on_front
    ]
    note = (
        f"{len(on_front)} of the experiment's {len(runs)} completed runs: no other run scored "
        f"higher for fewer worker-seconds. The tuning trials ran on {result.workers} workers"
        + (" (and, for the transfer, on 1)" if result.transfer is not None else "")
        + "; the naive settings ran on each cluster size."
    )
    title = f"Quality against billable cost, cluster sizes {min(result.static)}..{result.workers}"
    table = (title, rows, note)
    if not on_front:
        return table, None
    picture = (
        "quality-vs-cost.png",
        f"Validation {label} against billable worker-seconds for every completed run; the "
        "Pareto front labelled with each run's workers.",
        figures.pareto_front(
            [(runs[name][1], runs[name][2], runs[name][0]) for name in on_front],
            [(v[1], v[2]) for name, v in runs.items() if name not in on_front],
            ("billable worker-seconds", f"validation {label}"),
            True,
        ),
    )
    return table, picture


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
