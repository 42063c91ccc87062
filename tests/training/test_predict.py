"""Batch prediction with real models and real workers: every built-in that keeps a model scores
rows as the model itself does, on 1 worker or split over 3 (the input's order kept), through
the API and the CLI; over several workers the rows, the model and the parts pass through the
job's staging (object storage, or a folder given); bad input is one line naming it, and
writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import fsspec
import lightgbm as lgb
import numpy as np
import pytest
import xgboost as xgb

from scaletune.api import Session
from scaletune.api._job import TrainingJob
from scaletune.cluster import Backend, LocalBackend
from scaletune.data import prepare_breast_cancer
from scaletune.spec import training_spec_from_dict
from scaletune.store import JobStatus, TrainingJobRecord
from scaletune.training import BatchPredictor, read_input
from scaletune.worker import WorkerTask
from tests.cli.test_cli import _cli
from tests.jobs import run_job

CANCER = {"dataset": "breast-cancer"}
DIGITS = {"dataset": "digits"}
JOBS: dict[str, dict[str, Any]] = {
    "xgboost": {"hyperparameters": {"num_round": 4, "max_depth": 2}, "channels": {"train": CANCER}},
    "lightgbm": {
        "hyperparameters": {"num_boost_round": 4, "num_leaves": 7},
        "channels": {"train": CANCER},
    },
    "dnn": {"hyperparameters": {"epochs": 1, "hidden_units": 8}, "channels": {"train": DIGITS}},
}


def _trained(session: Session, algorithm: str) -> TrainingJobRecord:
    spec = training_spec_from_dict({"algorithm": algorithm, "instance_count": 2, **JOBS[algorithm]})
    record = run_job(session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    return record


@pytest.mark.parametrize("algorithm", list(JOBS))
def test_each_model_scores_rows_as_itself_on_one_worker_or_three_in_order(
    session: Session, algorithm: str
) -> None:
    record = _trained(session, algorithm)
    data = "digits" if algorithm == "dnn" else "breast-cancer"  # its test split
    job = TrainingJob(record.id, session.store)
    one = job.predict(data)
    three = job.predict(data, instance_count=3, backend=session.backend)
    assert (one.workers, three.workers) == (1, 3)
    np.testing.assert_array_equal(one.values, three.values)  # the same rows, the same order
    model = Path(record.artifact or "")
    if algorithm == "dnn":
        assert one.values.shape[1] == 10
        np.testing.assert_allclose(one.values.sum(axis=1), 1, rtol=1e-5)
        return
    features = prepare_breast_cancer()["test"].features
    if algorithm == "xgboost":
        booster = xgb.Booster(model_file=str(model / "xgboost-model.json"))
        own = booster.predict(xgb.DMatrix(features, feature_names=booster.feature_names))
    else:
        own = np.asarray(
            lgb.Booster(model_file=str(model / "lightgbm-model.txt")).predict(features)
        )
    np.testing.assert_allclose(one.values, own, rtol=1e-6)
    # A matrix of the features alone, in reverse: the predictions, reversed.
    np.testing.assert_array_equal(job.predict(features[::-1]).values, one.values[::-1])


def test_the_cli_writes_one_prediction_a_row_and_takes_a_tuning_jobs_best(
    session: Session, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = _trained(session, "lightgbm")
    rows = tmp_path / "rows.csv"  # the features alone, no label column
    features = prepare_breast_cancer()["test"].features[:7]
    np.savetxt(rows, features, delimiter=",")
    output = tmp_path / "out" / "predictions.csv"
    output.parent.mkdir()
    code, out, err = _cli(
        capsys, "predict", record.id, "--data", str(rows), "--output", str(output),
        "--instance-count", "2", "--json",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["rows"], summary["workers"], summary["job"]) == (7, 2, record.id)
    written = np.loadtxt(output, delimiter=",", skiprows=1)
    assert output.read_text().splitlines()[0] == "prediction"
    own = lgb.Booster(model_file=str(Path(record.artifact or "", "lightgbm-model.txt")))
    np.testing.assert_allclose(written, own.predict(features), rtol=1e-6)

    from tests.simulated import simulated_tuning

    tuning = simulated_tuning(session.store, 4)  # a tuning job whose best trial is this one
    session.store.set_tuning_best(tuning.id, record.id, 0.99)
    best = tmp_path / "best.csv"
    code, _, err = _cli(
        capsys, "predict", "--best-of", tuning.id, "--data", str(rows), "--output", str(best)
    )
    assert code == 0, err
    assert best.read_text() == output.read_text()


class _Recorded:
    """The session's backend, keeping the tasks it is handed: what a worker on another machine
    would be told to read and write."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.tasks = backend, list[WorkerTask]()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def launch(self, tasks: list[WorkerTask], *args: Any, **kwargs: Any) -> Any:
        self.tasks += tasks
        return self.backend.launch(tasks, *args, **kwargs)

    def places(self) -> list[str]:
        """Every file or folder the tasks name for the rows, the model and the parts."""
        places = []
        for task in self.tasks:
            settings = task.hyperparameters
            files = task.channels["data"].files
            places += [settings.model_dir, settings.output_dir, str(files.features)]  # type: ignore[attr-defined]
        return places


def test_over_workers_rows_model_and_parts_pass_through_the_jobs_staging_or_one_given(
    store_path: Path, s3_bucket: str, tmp_path: Path
) -> None:
    # Workers of its own, started once the local S3's address is set for them to inherit.
    with LocalBackend(warm_pool=False) as local, Session(store_path, backend=local) as session:
        staging = f"{s3_bucket}/staging"
        job = {**JOBS["xgboost"], "cluster": {"staging": staging}}
        record = run_job(
            session, training_spec_from_dict({"algorithm": "xgboost", "instance_count": 2, **job})
        )
        assert record.status is JobStatus.COMPLETED, record.failure_reason
        assert not str(record.artifact).startswith("s3://")  # published here: it is staged
        backend = _Recorded(local)
        predictor = BatchPredictor(session.store, cast(Backend, backend))  # it delegates
        rows = read_input("breast-cancer")
        here = predictor.predict(record.id, rows)
        spread = predictor.predict(record.id, rows, instance_count=2)
        np.testing.assert_array_equal(spread.values, here.values)
        assert len(backend.tasks) == 2
        assert all(place.startswith(f"{staging}/scaletune-") for place in backend.places())
        assert fsspec.filesystem("s3").find(staging) == []  # removed once the parts are read

        shared = tmp_path / "shared"  # a folder every node would mount, given for this call
        backend.tasks.clear()
        again = predictor.predict(record.id, rows, instance_count=2, staging=shared)
        np.testing.assert_array_equal(again.values, here.values)
        assert all(place.startswith(f"{shared}/scaletune-") for place in backend.places())
        assert list(shared.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "nowhere.csv"], "--data 'nowhere.csv': no such file or folder"),
        (["--data", "digits"], "--data has 65 columns (digits:test); job"),
        (["--data", "breast-cancer", "--instance-count", "0"], "--instance-count 0: give 1 to"),
        (["--data", "breast-cancer:nope"], "--data 'breast-cancer:nope': breast-cancer has"),
        (
            ["--data", "breast-cancer", "--instance-count", "2", "--staging", "/dev/null/x"],
            "--staging '/dev/null/x' cannot be written",
        ),
        (
            ["--data", "breast-cancer", "--instance-count", "2", "--backend", "yarn"],
            "--backend 'yarn': give one of local, ray",
        ),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    session: Session,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    record = _trained(session, "xgboost")
    output = tmp_path / "predictions.csv"
    code, _, err = _cli(capsys, "predict", record.id, *args, "--output", str(output))
    assert code == 2
    (line,) = err.strip().splitlines()
    assert message in line, line
    assert list(tmp_path.iterdir()) == [] or not output.exists()


def test_a_job_without_a_model_and_a_script_job_are_refused(
    session: Session, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.algorithms.script.test_script import _script_job
    from tests.cluster import programs

    spec = training_spec_from_dict({"algorithm": "xgboost", "instance_count": 2, **JOBS["xgboost"]})
    failed = run_job(session, spec, programs.raise_on_rank_one)
    script = run_job(session, _script_job(tmp_path, "print('done')\n"))
    assert (failed.status, script.status) == (JobStatus.FAILED, JobStatus.COMPLETED)
    output = tmp_path / "predictions.csv"
    for job, said in (
        (failed, f"job {failed.id!r} has no model to predict with: it is Failed"),
        (script, f"job {script.id!r} ran algorithm 'script': its model is whatever"),
    ):
        code, _, err = _cli(
            capsys, "predict", job.id, "--data", "breast-cancer", "--output", str(output)
        )
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
        assert not output.exists()
