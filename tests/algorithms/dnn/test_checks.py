"""Bad DNN jobs are refused with one line naming the value, before any worker starts."""

from __future__ import annotations

import gzip
import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from scaletune.api import Estimator, Session
from scaletune.data import LABELS_MAGIC
from scaletune.diagnostics import critical_batch_advice
from scaletune.errors import InvalidInputError
from tests.cli.test_cli import EXAMPLES, _cli
from tests.conftest import SHARED_DATA

DIGITS = {"dataset": "digits"}


@pytest.mark.parametrize(
    ("hyperparameters", "distribution", "message"),
    [
        (
            {"optimizer": "rmsprop"},
            {},
            "hyperparameters.optimizer: Input should be 'sgd' or 'adam' (got 'rmsprop')",
        ),
        (
            {"batch_size": 0},
            {},
            "hyperparameters.batch_size: Input should be greater than or equal to 1 (got 0)",
        ),
        ({"lr_scaling": "cubic"}, {}, "hyperparameters.lr_scaling"),
        (
            {},
            {"strategy": "parameter_server", "mode": "eventual"},
            "distribution.mode: Input should be 'sync' or 'async' (got 'eventual')",
        ),
        (
            {},
            {"strategy": "allreduce", "mode": "async"},
            "distribution.mode='async' needs "
            "distribution.strategy='parameter_server' (got 'allreduce')",
        ),
        (
            {},
            {"strategy": "parameter_server", "max_staleness": 2},
            "distribution.max_staleness=2 applies to distribution.mode='async' only",
        ),
        (
            {},
            {"strategy": "allreduce", "max_staleness": 2},
            "distribution.max_staleness=2 applies to the parameter server's asynchronous mode",
        ),
        (
            {},
            {"mode": "async", "max_staleness": -1},
            "distribution.max_staleness: Input should be greater than or equal to 0 (got -1)",
        ),
        (
            {},
            {"strategy": "allreduce", "backup_workers": 1},
            "distribution.backup_workers=1 must be less than the job's workers (1)",
        ),
        (
            {},
            {"mode": "async", "backup_workers": 1},
            "distribution.backup_workers=1 applies to synchronous rounds",
        ),
        (
            {},
            {"strategy": "parameter_server", "backup_workers": 1},
            "distribution.backup_workers=1 must be less than the job's workers (1)",
        ),
        (
            {"lr_scaling": "adascale"},
            {"strategy": "parameter_server", "backup_workers": 1},
            "distribution.backup_workers=1 must be less than",
        ),
        (
            {},
            {"mode": "async", "max_staleness": 0, "staleness_compensation": "dc"},
            "distribution.staleness_compensation='dc' applies to distribution.mode='async' only "
            "(max_staleness = 0 is synchronous)",
        ),
        (
            {"lr_scaling": "adascale", "optimizer": "adam"},
            {},
            "hyperparameters.lr_scaling='adascale' scales SGD's step; "
            "hyperparameters.optimizer='adam' normalises its own",
        ),
        (
            {"lr_scaling": "adascale"},
            {"strategy": "parameter_server", "mode": "async"},
            "hyperparameters.lr_scaling='adascale' needs synchronous updates",
        ),
        (
            {},
            {"strategy": "parameter_server", "staleness_compensation": "lr"},
            "distribution.staleness_compensation='lr' applies to distribution.mode='async' only",
        ),
        (
            {},
            {"strategy": "parameter_server", "mode": "async", "staleness_compensation": "x"},
            "distribution.staleness_compensation: Input should be 'none', 'lr', 'dc' or 'auto' "
            "(got 'x')",
        ),
        (
            {"lr_schedule": "cosine", "lr_final": 2},
            {},
            "hyperparameters.lr_final: Input should be less than or equal to 1 (got 2)",
        ),
    ],
)
def test_bad_specs(
    hyperparameters: dict[str, Any], distribution: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        Estimator("dnn", hyperparameters, distribution=distribution).spec({"train": DIGITS})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def _prepare_fails(session: Session, channels: dict[str, Any], message: str, **hp: Any) -> None:
    spec = Estimator("dnn", hp, instance_count=2, session=session).spec(channels)
    with pytest.raises(InvalidInputError, match=message):
        session.controller.prepare(spec)
    assert session.store.list_training_jobs() == []  # nothing half-written


def test_a_cnn_needs_square_images(session: Session) -> None:
    _prepare_fails(
        session, {"train": {"dataset": "breast-cancer"}}, "rows have 30 features", model="cnn"
    )


def test_labels_must_be_class_numbers(session: Session, tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("0,0.1\n1.5,0.2\n1,0.3\n")
    _prepare_fails(
        session, {"train": {"path": str(tmp_path / "train.csv")}}, "has label 1.5; class labels"
    )


def test_num_classes_must_cover_the_labels(session: Session) -> None:
    _prepare_fails(
        session, {"train": DIGITS}, "num_classes=5 but the data has label 9", num_classes=5
    )


@pytest.mark.skipif(not (SHARED_DATA / "mnist").exists(), reason="shared MNIST is missing")
def test_a_broken_idx_file_is_refused_before_the_job_exists(
    session: Session, tmp_path: Path
) -> None:
    folder = shutil.copytree(SHARED_DATA / "mnist", tmp_path / "mnist")
    # Labels where images belong: a wrong magic number.
    header = struct.pack(">II", LABELS_MAGIC, 3) + bytes(3)
    (folder / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(header))
    channel = {"dataset": "mnist", "dataset_file": str(folder)}
    _prepare_fails(session, {"train": channel}, "has magic number 2049, expected 2051")


def test_cli_exits_2_with_one_line(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(
        capsys,
        "train",
        str(EXAMPLES / "dnn-digits.toml"),
        "--set",
        "hyperparameters.optimizer=rmsprop",
    )
    assert code == 2
    assert err.strip().count("\n") == 0 and "'rmsprop'" in err
    assert not store_path.exists() or "Traceback" not in err


def test_backup_workers_as_many_as_the_workers_exit_2_from_the_cli(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(
        capsys,
        "train",
        str(EXAMPLES / "dnn-digits.toml"),
        "--set",
        "instance_count=3",
        "--set",
        "distribution.strategy=parameter_server",
        "--set",
        "distribution.backup_workers=3",
    )
    assert code == 2
    assert err.strip() == (
        "error: distribution.backup_workers=3 must be less than the job's workers (3): a "
        "round needs one gradient at least"
    )


def test_backup_workers_with_adascale_are_refused_naming_both() -> None:
    refused = r"backup_workers=1 with hyperparameters\.lr_scaling='adascale'"
    with pytest.raises(InvalidInputError, match=refused):
        Estimator(
            "dnn",
            {"lr_scaling": "adascale"},
            instance_count=3,
            distribution={"strategy": "parameter_server", "backup_workers": 1},
        ).spec({"train": DIGITS})


def test_all_reduce_takes_backup_workers_but_not_in_an_elastic_job() -> None:
    distribution = {"strategy": "allreduce", "backup_workers": 1}
    spec = Estimator("dnn", {}, instance_count=3, distribution=distribution).spec({"train": DIGITS})
    assert spec.distribution.backup_workers == 1
    with pytest.raises(InvalidInputError, match=r"backup_workers=1 with an elastic job"):
        Estimator(
            "dnn",
            {},
            instance_count={"min": 2, "max": 3},
            distribution=distribution,
            checkpoint={"enabled": True},
        ).spec({"train": DIGITS})


@pytest.mark.parametrize("algorithm", ["xgboost", "lightgbm"])
def test_backup_workers_are_refused_where_every_worker_is_waited_for(algorithm: str) -> None:
    with pytest.raises(InvalidInputError, match=f"algorithm '{algorithm}' waits for every"):
        Estimator(algorithm, {}, instance_count=3, distribution={"backup_workers": 1}).spec(
            {"train": {"dataset": "breast-cancer"}}
        )


def test_staleness_bound_is_read_as_max_staleness() -> None:
    spec = Estimator("dnn", {}, distribution={"mode": "async", "staleness_bound": 3}).spec(
        {"train": DIGITS}
    )
    assert spec.distribution.max_staleness == 3


def test_critical_batch_advice() -> None:
    advice = critical_batch_advice({"gns:b_simple": 1000.0}, {"batch_size": 64})
    assert advice == (
        "critical batch ≈ 1000; at per-worker batch 64 the useful cluster size is about 15.6 "
        "workers"
    )
    assert critical_batch_advice({"validation:accuracy": 0.9}, {"batch_size": 64}) is None
    with_accumulation = critical_batch_advice(
        {"gns:b_simple": 256.0}, {"batch_size": 64, "gradient_accumulation_steps": 4}
    )
    assert with_accumulation is not None and "about 1.0 worker" in with_accumulation


def test_the_job_summary_reads_the_gradient_noise_scale(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(
        capsys, "train", str(EXAMPLES / "dnn-digits.toml"), "--set", "hyperparameters.epochs=2"
    )
    assert code == 0
    text = " ".join(out.split())  # the table wraps long cells
    assert "diagnosis critical batch ≈" in text
    assert "at per-worker batch 32 the useful cluster size is about" in text


def test_async_alone_selects_the_parameter_server() -> None:
    spec = Estimator("dnn", distribution={"mode": "async"}).spec({"train": DIGITS})
    assert spec.distribution.strategy.value == "parameter_server"


def test_the_digits_example_runs_asynchronously_from_the_cli(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(
        capsys,
        "train",
        str(EXAMPLES / "dnn-digits.toml"),
        "--set",
        "distribution.mode=async",
        "--set",
        "hyperparameters.epochs=2",
        "--json",
    )
    assert code == 0
    job = json.loads(out)
    assert job["status"] == "Completed"
    assert job["spec"]["distribution"]["strategy"] == "parameter_server"
    assert {"validation:accuracy", "ps:staleness_mean", "test:accuracy"} <= set(
        job["final_metrics"]
    )
