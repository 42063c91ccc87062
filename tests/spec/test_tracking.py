"""`[tracking]`: where a job is recorded besides the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scaletune.errors import InvalidInputError
from scaletune.spec import (
    MLFLOW_URI_VARIABLE,
    TrackingSpec,
    TuningJobSpec,
    load_training_spec,
    training_spec_from_dict,
    tuning_spec_from_dict,
)

TRAINING: dict[str, Any] = {
    "algorithm": "xgboost",
    "hyperparameters": {"eval_metric": "auc"},
    "channels": {"train": {"dataset": "breast-cancer"}, "validation": {"dataset": "digits"}},
}


def _tuning(**fields: Any) -> TuningJobSpec:
    raw: dict[str, Any] = {
        "objective_metric": "validation:auc",
        "max_jobs": 2,
        "ranges": {"eta": {"type": "Continuous", "min_value": 0.1, "max_value": 0.3}},
        "training": dict(TRAINING),
    }
    raw.update(fields)
    return tuning_spec_from_dict(raw)


def test_by_default_tensorboard_in_the_jobs_folder_and_no_mlflow() -> None:
    tracking = training_spec_from_dict(TRAINING).tracking
    assert tracking.tensorboard is True
    assert tracking.mlflow_uri({}) is None


def test_the_environment_names_the_mlflow_server_when_the_spec_does_not() -> None:
    environ = {MLFLOW_URI_VARIABLE: "http://127.0.0.1:5000"}
    assert TrackingSpec().mlflow_uri(environ) == "http://127.0.0.1:5000"
    assert TrackingSpec(mlflow="http://other:1").mlflow_uri(environ) == "http://other:1"
    assert TrackingSpec().mlflow_uri({MLFLOW_URI_VARIABLE: ""}) is None


def test_a_tensorboard_folder_is_relative_to_the_job_file(tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text(
        'algorithm = "xgboost"\n[channels.train]\ndataset = "breast-cancer"\n'
        '[tracking]\ntensorboard = "runs"\nmlflow = "sqlite:///mlflow.db"\n'
    )
    tracking = load_training_spec(job).tracking
    assert tracking.tensorboard == tmp_path / "runs"
    assert tracking.mlflow == "sqlite:///mlflow.db"  # a URI is MLflow's to read


@pytest.mark.parametrize(
    ("tracking", "named"),
    [
        ({"tensorboard": 3}, "tracking.tensorboard"),
        ({"mlflow": ""}, "tracking.mlflow"),
        ({"mlflow_experiment": ""}, "tracking.mlflow_experiment"),
        ({"wandb": "x"}, "unknown key 'tracking.wandb'"),
    ],
)
def test_a_bad_tracking_value_is_one_line_naming_it(tracking: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidInputError, match=named.replace(".", r"\.")) as caught:
        training_spec_from_dict({**TRAINING, "tracking": tracking})
    assert "\n" not in str(caught.value)


def test_a_tuning_jobs_tracking_is_its_trials_and_overrides_the_training_tables() -> None:
    spec = _tuning(
        tracking={"mlflow": "http://127.0.0.1:5000"},
        training={**TRAINING, "tracking": {"mlflow": "http://elsewhere:1", "tensorboard": False}},
    )
    expected = TrackingSpec(mlflow="http://127.0.0.1:5000", tensorboard=False)
    assert spec.tracking == expected
    assert spec.training.tracking == expected
    assert spec.trial_spec({"eta": 0.2}).tracking == expected
    # Read back from the store, it is the same.
    again = TuningJobSpec.model_validate(spec.model_dump(mode="json"))
    assert again.tracking == again.training.tracking == expected


def test_a_tuning_job_without_its_own_tracking_takes_the_training_tables() -> None:
    spec = _tuning(training={**TRAINING, "tracking": {"mlflow_experiment": "bank"}})
    assert spec.tracking.mlflow_experiment == "bank"
    assert spec.trial_spec({"eta": 0.2}).tracking.mlflow_experiment == "bank"


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1:5000",
        "https://mlflow.example.com",
        "sqlite:///mlflow.db",
        "postgresql+psycopg2://user@host/db",
        "databricks",
        "file:///tmp/mlruns",
        "mlruns",
    ],
)
def test_uris_mlflow_has_a_store_for_are_taken(uri: str) -> None:
    assert TrackingSpec(mlflow=uri).mlflow == uri


def test_a_uri_mlflow_has_no_store_for_is_refused_as_the_file_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli.test_cli import _cli

    job = tmp_path / "job.toml"
    job.write_text(
        'algorithm = "xgboost"\nchannels.train = { dataset = "breast-cancer" }\n'
        '[tracking]\nmlflow = "ftp://nowhere"\n'
    )
    store = tmp_path / "store.db"
    code, out, err = _cli(capsys, "train", str(job), "--store", str(store))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "tracking.mlflow" in line and "'ftp://nowhere'" in line
    assert "no tracking store for ftp://" in line
    assert not store.exists()  # refused before the store was opened
