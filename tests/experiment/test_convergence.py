"""The convergence experiment end to end on tiny configurations, and its report."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from scaletune.api import Session
from scaletune.experiment import ExperimentProgress, convergence_report, plan_for, run_convergence
from scaletune.experiment._figures import best_so_far
from scaletune.store import JobStatus, TrainingJobRecord


def _check_report(folder: Path, tables: int, pictures: int) -> str:
    page = (folder / "report.html").read_text()
    assert page.count("<table ") == tables
    images = re.findall(r'<img [^>]*src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == pictures and all(len(image) > 1000 for image in images)
    assert len(list(folder.glob("*.png"))) == pictures
    markdown = (folder / "results.md").read_text()
    assert markdown.count("](") == pictures  # every picture linked
    assert json.loads((folder / "results.json").read_text())["configuration"]["seed"] == 0
    return page


def test_xgboost_experiment_with_a_cluster_size_sweep(session: Session, tmp_path: Path) -> None:
    plan = plan_for("xgboost", None, max_jobs=4, max_parallel_jobs=2)
    progress: list[ExperimentProgress] = []
    result = run_convergence(session, plan, [2, 3], seed=0, on_progress=progress.append)
    assert sorted(result.static) == [1, 2, 3] and result.workers == 3
    assert all(run.record.status is JobStatus.COMPLETED for run in result.static.values())
    hyperband = result.hyperband.summary
    assert sum(hyperband.job_counts.values()) == 4
    assert hyperband.record.strategy == "Hyperband"
    assert result.without_early_stopping.summary.record.strategy == "Random"
    assert result.tuned.record.hyperparameters == hyperband.best.hyperparameters  # type: ignore[union-attr]
    assert [p.phase_number for p in progress][-1] == progress[-1].phases == 6
    report = convergence_report(result)
    page = _check_report(report.write(tmp_path / "out").parent, tables=4, pictures=5)
    _check_front(report, result)
    for title in (
        "Scaling out with the same settings",
        "Tuning the 3-worker job",
        "Cluster size, same settings",
        "Quality against billable cost, cluster sizes 1..3",
        "reference: Hyperband",
        "0.63",
    ):
        assert title in page
    # The configuration and the versions, escaped inside <pre>.
    assert "&#34;naive_hyperparameters&#34;" in page and "&#34;packages&#34;" in page


def test_dnn_experiment(session: Session, tmp_path: Path) -> None:
    plan = plan_for("dnn", None, max_jobs=3, max_parallel_jobs=1)
    result = run_convergence(session, plan, [2], seed=0)
    assert result.static[2].record.spec["distribution"]["mode"] == "async"
    assert len(result.static[1].curve) == plan.hyperparameters["epochs"]
    # Tuned on one worker, carried to two with AdaScale on all-reduce.
    transfer = result.transfer
    assert transfer is not None
    assert {t.instance_count for t in transfer.tuning.trials} == {1}
    assert sum(transfer.tuning.summary.job_counts.values()) == 3
    best = transfer.tuning.summary.best
    assert best is not None
    for run in (transfer.one_worker_settings, transfer.transferred):
        assert run.record.status is JobStatus.COMPLETED
        assert run.record.instance_count == 2
        assert run.record.spec["distribution"]["strategy"] == "allreduce"
        assert run.record.hyperparameters["lr_scaling"] == "adascale"
        assert len(run.curve) == plan.hyperparameters["epochs"]  # one worker's epochs
    assert transfer.transferred.record.hyperparameters["learning_rate"] == pytest.approx(
        best.hyperparameters["learning_rate"]
    )
    report = convergence_report(result)
    page = _check_report(report.write(tmp_path / "out").parent, tables=4, pictures=4)
    assert "Tuned on 1 worker, carried to 2 with AdaScale" in page
    _check_front(report, result)


def _check_front(report: Any, result: Any) -> None:
    """The front's runs: none of the experiment's completed runs scores higher for less."""
    (rows, note) = next((r, n) for t, r, n in report.tables if t.startswith("Quality against"))
    header, *front = rows
    assert header == [
        "run",
        "workers",
        "validation " + result.plan.metric_label,
        "billable worker-s",
    ]
    assert front and "completed runs: no other run scored higher" in note
    runs = [
        (run.record.final_metrics[result.plan.objective_metric], run.record.billable_seconds)
        for run in result.static.values()
    ]
    for trials in (result.hyperband.trials, result.without_early_stopping.trials):
        runs += [
            (t.objective, t.billable_seconds) for t in trials if t.status is JobStatus.COMPLETED
        ]
    for _, _, score, cost in front:
        assert not any(
            s is not None and c is not None and s > float(score) + 1e-4 and c < float(cost) - 0.05
            for s, c in runs
        )


def _trial(objective: float | None, end: float, cost: float) -> TrainingJobRecord:
    return TrainingJobRecord(
        id=f"t{end}",
        name=None,
        algorithm="xgboost",
        status=JobStatus.COMPLETED,
        spec={},
        hyperparameters={},
        instance_count=1,
        created_at=0,
        start_time=0,
        end_time=end,
        wall_seconds=cost,
        billable_seconds=cost,
        objective=objective,
    )


@pytest.mark.parametrize(
    ("maximize", "expected"), [(True, [None, 0.5, 0.5, 0.9]), (False, [None, 0.5, 0.2, 0.2])]
)
def test_best_so_far_follows_the_order_trials_ended(
    maximize: bool, expected: list[float | None]
) -> None:
    trials = [_trial(0.9, 4, 1), _trial(None, 1, 2), _trial(0.5, 2, 3), _trial(0.2, 3, 4)]
    costs, bests = best_so_far(trials, maximize)
    assert costs == [2, 5, 9, 10]
    assert bests == expected
