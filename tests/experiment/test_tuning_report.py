"""`scaletune report` of a large tuning job: every trial in analytics.csv and the pictures,
the best of them in the page's table."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from scaletune.analysis import summarize
from scaletune.experiment import _tuning_report, drawn_curves, tuning_job_report
from scaletune.store import Store
from tests.simulated import simulated_tuning


def test_a_large_tuning_jobs_report_shows_the_best_and_files_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tuning_report, "TABLE_ROWS", 10)
    monkeypatch.setattr(_tuning_report, "CURVES_DRAWN", 12)
    monkeypatch.setattr(_tuning_report, "CURVES_BEST", 4)
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        record = simulated_tuning(store, 30)
        summary = summarize(store, record.id)
        trials = store.trials.rows(record.id)
        drawn = drawn_curves(trials, maximize=True)
        curves = store.trials.curves(record.id, "accuracy", job_ids=drawn)
    best = sorted((t for t in trials if t.objective is not None), key=lambda t: -(t.objective or 0))
    assert drawn is not None and len(drawn) <= 12 and len(set(drawn)) == len(drawn)
    assert {t.id for t in best[:4]} <= set(drawn)  # the best, then others evenly spaced
    report = tuning_job_report(summary, trials, curves)
    caption = next(text for name, text, _ in report.pictures if name == "tuning-trials.png")
    assert caption.startswith(f"{len(curves)} of 30 trials' accuracy (the best 4, the others")
    # the JSON lists what the page does: the best 10 (every trial is in analytics.csv)
    assert [t["id"] for t in report.data["summary"]["trials"]] == [t.id for t in best[:10]]
    assert ["ended", "max_jobs=30 reached"] in report.tables[0][1]  # the summary says why
    _, rows, note = report.tables[1]
    header, *body = rows
    assert len(body) == 10
    assert note == "The 10 best of 30; every training job is in analytics.csv."
    shown = [float(row[header.index("FinalObjectiveValue")]) for row in body]
    assert shown == pytest.approx([t.objective for t in best[:10]], abs=5e-4)  # 4 digits
    analytics = list(csv.DictReader(io.StringIO(report.files["analytics.csv"])))
    assert [row["TrainingJobName"] for row in analytics] == [t.id for t in trials]
    page = report.write(tmp_path / "report")
    assert (tmp_path / "report" / "analytics.csv").read_text() == report.files["analytics.csv"]
    assert (tmp_path / "report" / "tuning-trials.png").read_bytes().startswith(b"\x89PNG")
    assert "The 10 best of 30" in page.read_text()


def test_a_multi_objective_report_has_its_front_target_and_picture(tmp_path: Path) -> None:
    from scaletune.analysis import trial_marks
    from tests.analysis.test_tradeoffs import _grid, _run

    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        tuning_id = _run(store, _grid(target_objective=0.7, max_parallel_jobs=9))
        summary = summarize(store, tuning_id)
        trials = store.trials.rows(tuning_id)
        curves = store.trials.curves(tuning_id, "accuracy")
        marks = trial_marks(store, summary.record)
    report = tuning_job_report(summary, trials, curves, marks)
    tables = {title: (rows, note) for title, rows, note in report.tables}
    front, note = tables["Pareto front"]
    assert front[0][:5] == [
        "training job",
        "workers",
        "accuracy",
        "billable_seconds",
        "wall_seconds",
    ]
    assert [row[1] for row in front[1:]] == ["1", "2", "3"]
    assert note == "3 completed trials that no other beats on every objective."
    target, note = tables["Target"]
    assert [row[:3] for row in target[1:]] == [
        ["cheapest", f"{tuning_id}-006", "1"],
        ["fastest", f"{tuning_id}-008", "3"],
    ]
    analytics = list(csv.DictReader(io.StringIO(report.files["analytics.csv"])))
    assert sum(row["ParetoFront"] == "True" for row in analytics) == 3
    report.write(tmp_path / "report")
    assert (tmp_path / "report" / "pareto-front.png").read_bytes().startswith(b"\x89PNG")


def test_the_summary_gives_the_trials_billing_per_capacity_class_and_its_cost(
    tmp_path: Path,
) -> None:
    from scaletune.experiment import CapacityBilling
    from scaletune.store import JobOutcome, JobStatus

    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        record = simulated_tuning(store, 4)
        first, second, *_ = store.training_jobs_of(record.id)
        for trial, billed in ((first, {"spot": 6.0}), (second, {"on-demand": 2.0, "spot": 4.0})):
            outcome = JobOutcome(
                JobStatus.COMPLETED, 1.0, 2.0, 1.0, 6.0, {}, billable_by_class=billed
            )
            store.finish_training_job(trial.id, outcome)
        by_class = store.trials.billable_by_class(record.id)
        summary = summarize(store, record.id)
    assert by_class == {"spot": 10.0, "on-demand": 2.0}
    prices = {"on-demand": 1.0, "spot": 0.25}
    report = tuning_job_report(summary, [], {}, billing=CapacityBilling(by_class, prices))
    rows = report.tables[0][1]
    assert ["… on spot", "10.0"] in rows and ["… on on-demand", "2.0"] in rows
    assert ["cost", "4.5 (on-demand 2, spot 2.5)"] in rows
    plain = tuning_job_report(summary, [], {}, billing=CapacityBilling({"on-demand": 8.0}))
    assert not [row for row in plain.tables[0][1] if row[0].startswith("… on")]


def test_a_step_line_keeps_only_its_corners() -> None:
    from scaletune.experiment._figures import step_corners

    points = [(1.0, 0.5), (2.0, 0.5), (3.0, 0.7), (4.0, 0.7), (5.0, 0.7)]
    assert step_corners(points) == [(1.0, 0.5), (3.0, 0.7), (5.0, 0.7)]
    assert step_corners(points[:1]) == points[:1] and step_corners([]) == []
