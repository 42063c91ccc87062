"""`scaletune advise`: a real 2-worker XGBoost job, advice from it alone and after a real
probe on one worker; bad input refused with one line, exit code 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scaletune.api import Session
from scaletune.spec import load_training_spec
from scaletune.store import JobStatus, Store
from tests.advice.test_advise import _elastic_run
from tests.cli.test_cli import EXAMPLES, _cli


@pytest.fixture(scope="module")
def trained_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real 2-worker job for the module, trained as `scaletune train` does: its store's
    folder and the job's id. Each test advises on a copy (a probe adds a job)."""
    folder = tmp_path_factory.mktemp("advised") / "store"
    with Session(folder / "scaletune.db") as session:
        spec = load_training_spec(EXAMPLES / "xgboost-csv.toml")
        record = session.controller.run(session.controller.prepare(spec))
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    return folder, record.id


@pytest.fixture
def trained(store_path: Path, trained_store: tuple[Path, str]) -> str:
    folder, job_id = trained_store
    shutil.copytree(folder, store_path.parent)
    return job_id


def test_advice_from_the_job_alone_then_after_a_probe(
    store_path: Path, trained: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "advise", trained, "--json")
    assert code == 0
    alone = json.loads(out)
    assert alone["metric"] == "validation:auc"  # the first validation metric; higher is better
    assert [p["instance_count"] for p in alone["predictions"]] == [1, 2, 3, 4]
    assert [p["measured_size"] for p in alone["predictions"]] == [False, True, False, False]
    assert alone["recommended_instance_count"] in (1, 2, 3, 4)
    elastic = alone["recommended_elastic_range"]
    assert 1 <= elastic["min"] <= elastic["max"] == alone["recommended_instance_count"]
    assert 1 <= alone["steps_to_quality"] <= 50
    # XGBoost: the same rounds on every size.
    assert {p["steps"] for p in alone["predictions"]} == {alone["steps_to_quality"]}
    with Store(f"sqlite:///{store_path}") as store:
        measured = store.get_training_job(trained)
    own = alone["predictions"][1]
    assert own["wall_seconds"] <= (measured.wall_seconds or 0) + 1e-6
    assert own["billable_seconds"] == pytest.approx(2 * own["wall_seconds"])

    code, out, err = _cli(capsys, "advise", trained, "--probe", "1", "--probe-steps", "6", "--json")
    assert code == 0, err
    probed = json.loads(out)
    (probe_id,) = probed["probes"]
    assert [p["measured_size"] for p in probed["predictions"]][:2] == [True, True]
    with Store(f"sqlite:///{store_path}") as store:
        probe = store.get_training_job(probe_id)
        assert (probe.instance_count, probe.hyperparameters["num_round"]) == (1, 6)
        assert probe.status.value == "Completed"
    code, out, _ = _cli(capsys, "advise", trained, "--probe-job", probe_id)
    assert code == 0
    assert "Predicted time and cost to reach that quality" in out
    assert f"probe jobs: {probe_id}" in out


def test_lower_is_better_is_read_from_the_metric_name(
    trained: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "advise", trained, "--metric", "validation:logloss", "--json")
    assert code == 0
    advice = json.loads(out)
    assert advice["metric"] == "validation:logloss"
    assert any("validation:logloss" in line for line in advice["basis"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["nope"], "nope"),
        (["{job}", "--metric", "validation:error"], "never reported 'validation:error'"),
        (["{job}", "--probe", "2", "--probe-steps", "2"], "--probe-steps 2"),
        (["{job}", "--preemptions-per-hour", "-1"], "--preemptions-per-hour -1: give a number"),
        (["{job}", "--preemptions-per-hour", "1", "--spot-price", "0"], "--spot-price 0"),
        (["{job}", "--preemptions-per-hour", "1", "--notice-seconds", "nan"], "--notice-seconds"),
        (["{job}", "--max-time-ratio", "0.5"], "--max-time-ratio 0.5: give a number of at least"),
    ],
)
def test_bad_advice_requests_exit_2_with_one_line(
    trained: str, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    code, _, err = _cli(capsys, "advise", *(a.format(job=trained) for a in args))
    assert code == 2
    assert expected in err and len(err.strip().splitlines()) == 1


def test_advice_on_an_elastic_run_names_the_range_to_ask_for(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 30 steps on 3 workers, 10 on 2 after a resize: cheapest on 1, fastest within 1.5x on 2.
    store_path.parent.mkdir(parents=True)
    with Store(f"sqlite:///{store_path}") as store:
        job = _elastic_run(store, [(3, 30, 0.3), (2, 10, 0.4)])
    code, out, _ = _cli(capsys, "advise", job)
    assert code == 0
    assert "- as an elastic job: instance_count = { min = 1, max = 2 }" in out
    assert "0.4 s on 2 (the same run, resized)" in out


def test_advice_on_spot_capacity_compares_the_mixes_and_recommends_one(
    trained: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["advise", trained, "--preemptions-per-hour", "20", "--notice-seconds", "30"]
    code, out, _ = _cli(capsys, *args, "--json")
    assert code == 0
    spot = json.loads(out)["spot"]
    mixes = {m["mix"]: m for m in spot["mixes"]}
    assert set(mixes) == {"on-demand", "elastic spot", "mixed"}
    assert spot["recommended_mix"] in mixes
    assert (spot["spot_price"], spot["fewest_workers"]) == (0.3, 1)  # half of its 2 workers
    assert mixes["on-demand"]["spot_worker_seconds"] == 0
    assert mixes["elastic spot"]["on_demand_worker_seconds"] == 0
    # A job that ends in seconds is rarely preempted: spot costs about 0.3 of on-demand (a
    # little less where a preemption leaves it on 1 worker for the rest).
    ratio = (
        mixes["elastic spot"]["cost_in_on_demand_worker_seconds"]
        / mixes["on-demand"]["cost_in_on_demand_worker_seconds"]
    )
    assert 0.2 < ratio < 0.4
    code, out, _ = _cli(capsys, *args)
    assert code == 0 and "On spot capacity: 20 preemptions a machine an hour" in out
