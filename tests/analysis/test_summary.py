"""A tuning job's summary, made of SQL aggregates, agrees with the same figures worked out
trial by trial from the full records and every reported point."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from scaletune.analysis import analytics_dataframe, summarize
from scaletune.store import JobStatus, Store
from tests.simulated import MAX_RESOURCE, simulated_tuning


def test_the_summary_matches_a_trial_by_trial_reckoning(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        record = simulated_tuning(store, 40)
        summary = summarize(store, record.id)
        trials = store.training_jobs_of(record.id)
        per_step = {}
        for trial in trials:
            series = store.metrics(trial.id, "accuracy")
            if len(series) >= 2:
                per_step[trial.id] = (series[-1].time - series[0].time) / (
                    series[-1].step - series[0].step
                )
        typical = statistics.median(per_step.values())
        unspent = sum(
            (MAX_RESOURCE - (trial.resource or 0))
            * per_step.get(trial.id, typical)
            * trial.instance_count
            for trial in trials
            if trial.status is JobStatus.STOPPED and trial.resource
        )
        frame = analytics_dataframe(store, record.id)
    stopped = sum(trial.status is JobStatus.STOPPED for trial in trials)
    assert 0 < stopped < len(trials), "Hyperband stops some trials and lets others run"
    assert summary.trial_count == len(trials) == 40
    assert summary.job_counts["Stopped"] == stopped
    billable = sum(trial.billable_seconds or 0.0 for trial in trials)
    assert summary.billable_seconds == pytest.approx(billable)
    assert summary.sequential_wall_seconds == pytest.approx(
        sum(trial.wall_seconds or 0.0 for trial in trials)
    )
    assert unspent > 0
    assert summary.billable_seconds_without_early_stopping == pytest.approx(billable + unspent)
    assert summary.best is not None and summary.best.id == record.best_training_job
    assert summary.to_json_dict()["best_hyperparameters"] == summary.best.hyperparameters
    assert list(frame["TrainingJobName"]) == [trial.id for trial in trials]
    assert list(frame["x"]) == [trial.hyperparameters["x"] for trial in trials]
    assert list(frame["instance_count"]) == [trial.instance_count for trial in trials]
    assert str(frame["TrainingStartTime"].dtype) == "datetime64[ns, UTC]"
