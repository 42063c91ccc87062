"""Jobs and tuning jobs tracked to a real MLflow server, read back with `MlflowClient`."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import mlflow.xgboost
import numpy as np
import pytest
import xgboost
from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient

from scaletune.api import Session
from scaletune.cli import main
from scaletune.errors import InvalidInputError
from scaletune.spec import (
    MLFLOW_URI_VARIABLE,
    TrackingSpec,
    TrainingJobSpec,
    training_spec_from_dict,
    tuning_spec_from_dict,
)
from scaletune.store import JobStatus
from scaletune.tracking import Tracking
from scaletune.tracking import _tracking as tracking_module
from scaletune.training import Stopper
from scaletune.tuning import TuningController
from scaletune.worker import Report
from tests.cluster import programs
from tests.jobs import ProgramOverride, run_job
from tests.tracking.conftest import Relay

ROUNDS = 6
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _spec(uri: str, experiment: str, **fields: Any) -> TrainingJobSpec:
    channel = {"dataset": "breast-cancer"}
    raw: dict[str, Any] = {
        "algorithm": "xgboost",
        "instance_count": 2,
        "hyperparameters": {"num_round": ROUNDS, "max_depth": 3, "eval_metric": "auc"},
        "channels": {"train": channel, "validation": channel},
        "tracking": {"mlflow": uri, "mlflow_experiment": experiment, "tensorboard": False},
    }
    raw.update(fields)
    return training_spec_from_dict(raw)


def _run_of(client: MlflowClient, experiment: str, scaletune_id: str) -> Run:
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    runs = client.search_runs(
        [found.experiment_id],
        filter_string=f"tags.`scaletune.id` = '{scaletune_id}'",
        run_view_type=ViewType.ALL,
    )
    assert len(runs) == 1, f"{len(runs)} runs for {scaletune_id}"
    return runs[0]


def _history(client: MlflowClient, run: Run, name: str) -> dict[int, float]:
    """The last value logged at each step (a retry logs the steps it redoes again)."""
    values: dict[int, float] = {}
    for metric in sorted(
        client.get_metric_history(run.info.run_id, name), key=lambda m: m.timestamp
    ):
        values[metric.step] = metric.value
    return values


def test_a_job_is_one_run_with_params_metrics_tags_and_its_xgboost_model(
    session: Session, mlflow_server: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    experiment = request.node.name
    record = run_job(session, _spec(mlflow_server, experiment))
    session.controller.tracking.flush(30)

    client = MlflowClient(mlflow_server)
    run = _run_of(client, experiment, record.id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == record.id
    assert run.data.params["num_round"] == str(ROUNDS)
    assert run.data.params["max_depth"] == "3"
    tags = run.data.tags
    assert tags["scaletune.algorithm"] == "xgboost"
    assert tags["scaletune.workers"] == "2"
    assert tags["scaletune.backend"] == "local"
    assert tags["scaletune.status"] == "Completed"
    assert tags["scaletune.attempts"] == "1"
    assert float(tags["scaletune.billable_seconds"]) == pytest.approx(
        record.billable_seconds, abs=1e-3
    )
    # Every report, at its step, as the store has it.
    for name in ("train:auc", "validation:auc"):
        stored = {p.step: p.value for p in session.store.metrics(record.id, name)}
        assert len(stored) == ROUNDS
        assert _history(client, run, name) == pytest.approx(stored)
    # The model in MLflow's xgboost flavour predicts as the job's own model does.
    local = client.download_artifacts(run.info.run_id, "model", str(tmp_path))
    logged = mlflow.xgboost.load_model(local)
    own = xgboost.Booster(model_file=str(Path(record.artifact or "", "xgboost-model.json")))
    rows = xgboost.DMatrix(
        np.random.default_rng(0).normal(size=(5, 30)), feature_names=own.feature_names
    )
    assert np.array_equal(logged.predict(rows), own.predict(rows))


def test_a_lightgbm_job_logs_its_model_in_mlflows_lightgbm_flavour(
    session: Session, mlflow_server: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import lightgbm
    import mlflow.lightgbm

    experiment = request.node.name
    spec = _spec(
        mlflow_server,
        experiment,
        algorithm="lightgbm",
        hyperparameters={"num_boost_round": 4, "num_leaves": 7, "metric": ["auc"]},
    )
    record = run_job(session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    session.controller.tracking.flush(30)
    client = MlflowClient(mlflow_server)
    run = _run_of(client, experiment, record.id)
    assert run.data.tags["scaletune.algorithm"] == "lightgbm"
    local = client.download_artifacts(run.info.run_id, "model", str(tmp_path))
    logged = mlflow.lightgbm.load_model(local)
    own = lightgbm.Booster(model_file=str(Path(record.artifact or "", "lightgbm-model.txt")))
    rows = np.random.default_rng(0).normal(size=(5, 30))
    assert np.array_equal(logged.predict(rows), own.predict(rows))


def test_a_retried_job_stays_one_run(
    session: Session, mlflow_server: str, request: pytest.FixtureRequest
) -> None:
    experiment = request.node.name
    spec = _spec(
        mlflow_server,
        experiment,
        instance_count=3,
        hyperparameters={"num_round": 12, "max_depth": 3, "eval_metric": "auc"},
        checkpoint={"every_steps": 4, "every_seconds": None},
    )
    record = run_job(session, spec, programs.xgboost_rank1_killed_at_round_7)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    session.controller.tracking.flush(30)

    client = MlflowClient(mlflow_server)
    run = _run_of(client, experiment, record.id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["scaletune.attempts"] == "2"
    stored = {p.step: p.value for p in session.store.metrics(record.id, "validation:auc")}
    assert _history(client, run, "validation:auc") == pytest.approx(stored)


def test_a_stopped_then_resumed_job_stays_one_run(
    session: Session, mlflow_server: str, request: pytest.FixtureRequest
) -> None:
    experiment = request.node.name
    spec = _spec(
        mlflow_server,
        experiment,
        hyperparameters={"num_round": 10, "max_depth": 3, "eval_metric": "auc"},
        checkpoint={"every_steps": 2, "every_seconds": None},
    )
    controller = session.controller
    stopper = Stopper()

    def stop_at_five(report: Report) -> None:
        if report.step >= 5:
            stopper.request()

    job = controller.prepare(spec)
    job = dataclasses.replace(
        job,
        algorithm=ProgramOverride(job.algorithm, programs.xgboost_held_at_round_5_until_stopped),
    )
    stopped = controller.run(job, stop=stopper, on_report=stop_at_five)
    assert stopped.status is JobStatus.STOPPED
    controller.tracking.flush(30)
    client = MlflowClient(mlflow_server)
    assert _run_of(client, experiment, stopped.id).info.status == "KILLED"

    resumed = controller.run(controller.prepare_resume(stopped.id))
    assert resumed.status is JobStatus.COMPLETED, resumed.failure_reason
    controller.tracking.flush(30)
    run = _run_of(client, experiment, stopped.id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["scaletune.attempts"] == "2"
    assert sorted(_history(client, run, "validation:auc")) == list(range(1, 11))


def test_a_trial_stopped_early_ends_its_run_finished_and_tagged_not_killed(
    session: Session, mlflow_server: str, request: pytest.FixtureRequest
) -> None:
    experiment = request.node.name
    spec = _spec(mlflow_server, experiment, hyperparameters={"num_round": 10, "max_depth": 3})
    controller = session.controller
    stopper = Stopper()

    def stopped_early_at_five(report: Report) -> None:
        if report.step >= 5:  # as a tuning job's scheduler stops a trial
            stopper.request(JobStatus.STOPPED, "stopped early at round 5", early=True)

    job = controller.prepare(spec)
    job = dataclasses.replace(
        job,
        algorithm=ProgramOverride(job.algorithm, programs.xgboost_held_at_round_5_until_stopped),
    )
    stopped = controller.run(job, stop=stopper, on_report=stopped_early_at_five)
    assert stopped.status is JobStatus.STOPPED  # the store says how it ended
    controller.tracking.flush(30)
    run = _run_of(MlflowClient(mlflow_server), experiment, stopped.id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["scaletune.stopped_early"] == "true"
    assert run.data.tags["scaletune.status"] == "Stopped"


def test_a_tuning_job_is_a_parent_run_over_its_trials_with_the_best_tagged(
    session: Session, mlflow_server: str, request: pytest.FixtureRequest
) -> None:
    experiment = request.node.name
    channel = {"dataset": "breast-cancer"}
    spec = tuning_spec_from_dict(
        {
            "objective_metric": "validation:auc",
            "strategy": "Random",
            "max_jobs": 3,
            "ranges": {"eta": {"type": "Continuous", "min_value": 0.05, "max_value": 0.5}},
            "tracking": {"mlflow": mlflow_server, "mlflow_experiment": experiment},
            "training": {
                "algorithm": "xgboost",
                "hyperparameters": {"num_round": 4, "max_depth": 2, "eval_metric": "auc"},
                "channels": {"train": channel, "validation": channel},
            },
        }
    )
    tuner = TuningController(session.controller, poll_seconds=0.05)
    tuning_id = tuner.create(spec)
    record = tuner.run(tuning_id, spec)
    assert record.status is JobStatus.COMPLETED
    session.controller.tracking.flush(30)

    client = MlflowClient(mlflow_server)
    parent = _run_of(client, experiment, tuning_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["scaletune.kind"] == "tuning"
    assert parent.data.params["max_jobs"] == "3"
    assert parent.data.tags["scaletune.best_job_id"] == record.best_training_job
    best_trial = session.store.get_training_job(record.best_training_job or "")
    # The best objective as a metric too: MLflow's run table shows it beside the trials'.
    assert parent.data.metrics["validation:auc"] == best_trial.final_metrics["validation:auc"]
    trials = session.store.training_jobs_of(tuning_id)
    assert len(trials) == 3
    for trial in trials:
        run = _run_of(client, experiment, trial.id)
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert float(run.data.params["eta"]) == pytest.approx(trial.hyperparameters["eta"])
        best = trial.id == record.best_training_job
        assert (run.data.tags.get("scaletune.best") == "true") is best


def test_a_server_cut_mid_job_costs_the_job_nothing_and_gets_every_update_when_back(
    session: Session, relay: Relay, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    experiment = request.node.name
    spec = _spec(
        relay.url,
        experiment,
        hyperparameters={"num_round": 8, "max_depth": 3, "eval_metric": "auc"},
    )
    caplog.set_level(logging.WARNING, logger="scaletune.tracking")

    def cut_at_three(report: Report) -> None:
        if report.step == 3:
            relay.cut()

    controller = session.controller
    record = controller.run(controller.prepare(spec), on_report=cut_at_three)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert len(session.store.metrics(record.id, "validation:auc")) == 8  # the store is whole
    # The run's end behind the held reports sends them at once; the cut server refuses, which
    # the sink's thread warns of as it happens (reports are paced, so maybe only now).
    deadline = time.monotonic() + 30
    while not any("did not answer" in m for m in caplog.messages) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any("did not answer" in message for message in caplog.messages)

    relay.restore()  # the server is back: what waited is sent
    assert controller.tracking.flush(60)
    client = MlflowClient(relay.url)
    run = _run_of(client, experiment, record.id)
    assert run.info.status == "FINISHED"
    assert sorted(_history(client, run, "validation:auc")) == list(range(1, 9))


def test_a_server_that_never_answers_leaves_a_warning_and_a_whole_store(
    store_path: Path, relay: Relay, caplog: pytest.LogCaptureFixture
) -> None:
    relay.cut()  # nothing listens at its port
    caplog.set_level(logging.WARNING, logger="scaletune.tracking")
    with Session(store_path) as session:
        record = run_job(session, _spec(relay.url, "never"))
        assert record.status is JobStatus.COMPLETED, record.failure_reason
        assert len(session.store.metrics(record.id, "validation:auc")) == ROUNDS
    assert any("were not sent" in message for message in caplog.messages)


def test_train_tracks_to_the_server_the_environment_names_and_json_stays_json(
    store_path: Path,
    mlflow_server: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCALETUNE_MLFLOW_TRACKING_URI", mlflow_server)
    argv = ["scaletune", "train", str(EXAMPLES / "xgboost-csv.toml"), "--json"]
    monkeypatch.setattr(sys, "argv", [*argv, "--set", "tracking.mlflow_experiment=cli"])
    main()
    job = json.loads(capsys.readouterr().out)  # MLflow printed nothing to stdout
    run = _run_of(MlflowClient(mlflow_server), "cli", job["id"])  # sent before the exit
    assert run.info.status == "FINISHED"


def test_a_tracking_system_not_installed_is_bad_input_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tracking_module, "_installed", lambda module: module != "mlflow")
    with pytest.raises(InvalidInputError, match=r"tracking.mlflow='http://127.0.0.1:1' needs"):
        Tracking(tmp_path).check(TrackingSpec(mlflow="http://127.0.0.1:1"))


def test_the_environments_uri_is_checked_as_the_job_is_prepared(tmp_path: Path) -> None:
    tracking = Tracking(tmp_path, environ={MLFLOW_URI_VARIABLE: "gopher://x"})
    with pytest.raises(InvalidInputError, match=rf"{MLFLOW_URI_VARIABLE}='gopher://x': MLflow"):
        tracking.check(TrackingSpec())


def test_a_folder_is_refused_unless_mlflow_is_told_to_keep_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = str(tmp_path / "mlruns")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(InvalidInputError, match=r"MLFLOW_ALLOW_FILE_STORE=true"):
        Tracking(tmp_path).check(TrackingSpec(mlflow=folder))
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    Tracking(tmp_path).check(TrackingSpec(mlflow=folder))
    Tracking(tmp_path).check(TrackingSpec(mlflow="sqlite:///" + str(tmp_path / "m.db")))
