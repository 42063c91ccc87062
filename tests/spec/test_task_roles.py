"""TensorFlow's parameter-server jobs: which rank plays which part, what each process is
billed as, and the values refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaletune.spec import TaskKind, TaskRole, load_training_spec, task_role
from scaletune.store import Store
from tests.cli.test_cli import _cli
from tests.jobs import digits_job


def test_rank_0_is_the_chief_then_the_workers_then_the_servers() -> None:
    roles = [task_role(rank, 6, 2) for rank in range(6)]
    assert roles == [
        TaskRole(TaskKind.CHIEF, 0),
        TaskRole(TaskKind.WORKER, 0),
        TaskRole(TaskKind.WORKER, 1),
        TaskRole(TaskKind.WORKER, 2),
        TaskRole(TaskKind.PS, 0),
        TaskRole(TaskKind.PS, 1),
    ]
    named = ["chief", "worker 0", "worker 1", "worker 2", "ps 0", "ps 1"]
    assert [str(role) for role in roles] == named
    # Without parameter servers every rank is a worker of its own index (mirrored, DDP).
    assert [task_role(rank, 3, None) for rank in range(3)] == [
        TaskRole(TaskKind.WORKER, rank) for rank in range(3)
    ]


def test_a_parameter_server_job_counts_its_chief_and_servers_as_tasks(tmp_path: Path) -> None:
    spec = load_training_spec(
        digits_job("tf-parameter-server-mnist.toml", tmp_path),
        ["instance_count=3", "distribution.parameter_servers=2"],
    )
    assert spec.tensorflow_parameter_server
    assert (spec.instance_count, spec.task_count) == (3, 6)
    assert [spec.task_name(rank) for rank in (0, 3, 5)] == [
        "chief (rank 0)",
        "worker 2 (rank 3)",
        "ps 1 (rank 5)",
    ]
    mirrored = load_training_spec(digits_job("tf-mirrored-mnist.toml", tmp_path))
    assert (mirrored.task_count, mirrored.task_name(1)) == (2, "worker 1")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["distribution.parameter_servers=0"],
            "distribution.parameter_servers: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            ["distribution.parameter_servers=many"],
            "distribution.parameter_servers: Input should be a valid integer",
        ),
        (
            ["distribution.strategy=allreduce"],
            "distribution.parameter_servers=1 is for script jobs with strategy 'parameter_server'",
        ),
        (
            ["script.metrics_rank=1"],
            "script.metrics_rank=1: under ParameterServerStrategy the chief (rank 0)",
        ),
    ],
)
def test_bad_parameter_server_values_are_refused_before_anything_starts(
    store_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    overrides: list[str],
    expected: str,
) -> None:
    job = digits_job("tf-parameter-server-mnist.toml", tmp_path)
    args = [arg for override in overrides for arg in ("--set", override)]
    code, _, err = _cli(capsys, "train", str(job), *args)
    assert code == 2
    assert expected in err and err.strip().count("\n") == 0
    if store_path.exists():  # nothing half-written
        with Store(f"sqlite:///{store_path}") as store:
            assert store.list_training_jobs() == []


def test_a_script_job_under_parameter_server_needs_the_servers(tmp_path: Path) -> None:
    from scaletune.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="say how many parameter-server tasks it needs"):
        load_training_spec(
            digits_job("tf-mirrored-mnist.toml", tmp_path),
            ["distribution.strategy=parameter_server"],
        )
    # The built-in dnn runs its own parameter server, in rank 0's process.
    with pytest.raises(InvalidInputError, match="the built-in dnn's parameter server runs"):
        load_training_spec(
            digits_job("tf-mirrored-mnist.toml", tmp_path),
            ["algorithm=dnn", "distribution.parameter_servers=1"],
        )


def test_a_tuning_job_of_parameter_server_trials_counts_every_task_for_its_warm_pool(
    tmp_path: Path,
) -> None:
    from scaletune.spec import load_tuning_spec

    spec = load_tuning_spec(
        digits_job("tuning-tf-parameter-server-mnist.toml", tmp_path),
        ["training.instance_count=3", "training.distribution.parameter_servers=2"],
    )
    assert (spec.max_instance_count, spec.max_task_count) == (3, 6)
