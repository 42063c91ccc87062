from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pandas as pd
import psutil
import pytest

from tests.cli.test_cli import _cli
from tests.conftest import wait_until

TUNING = """
objective_metric = "validation:auc"
strategy = "Hyperband"
max_jobs = 4
max_parallel_jobs = 2

[hyperband]
min_resource = 1
max_resource = 9
rank_by = "value"  # round 1 ranks values, and earns the note below

[ranges]
eta = { type = "Continuous", min_value = 0.05, max_value = 1 }
max_depth = { type = "Integer", min_value = 1, max_value = 6 }

[training]
algorithm = "xgboost"
instance_count = 2
hyperparameters = { num_round = 9, eval_metric = "auc" }
channels.train = { dataset = "breast-cancer" }
channels.validation = { dataset = "breast-cancer" }
"""


def test_tune_show_analytics_and_list(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "tuning.toml"
    file.write_text(TUNING)
    code, out, err = _cli(capsys, "tune", str(file), "--json", "--set", "max_jobs=3")
    assert code == 0
    summary = json.loads(out)  # the note below goes to stderr: stdout stays one object
    assert err.count("note: Hyperband's first rung is round 1, where validation:auc") == 1
    assert (summary["status"], summary["strategy"]) == ("Completed", "Hyperband")
    assert sum(summary["job_counts"].values()) == 3
    assert summary["best_training_job"].startswith(summary["id"])
    for key in (
        "best_objective",
        "billable_seconds",
        "billable_seconds_without_early_stopping",
        "wall_seconds",
        "sequential_wall_seconds",
    ):
        assert isinstance(summary[key], float)

    code, out, _ = _cli(capsys, "tuning", "show", summary["id"], "--json")
    assert json.loads(out)["id"] == summary["id"]
    code, out, _ = _cli(capsys, "tuning", "show", summary["id"])
    assert "best validation:auc" in out
    csv = tmp_path / "trials.csv"
    code, out, _ = _cli(capsys, "tuning", "analytics", summary["id"], "--csv", str(csv))
    assert code == 0
    assert len(pd.read_csv(csv)) == 3
    code, out, _ = _cli(capsys, "tuning", "list", "--json")
    assert [entry["id"] for entry in json.loads(out)] == [summary["id"]]
    code, out, _ = _cli(capsys, "tuning", "stop", summary["id"])
    assert "already ended: Completed" in out


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "ranges.etaa={type='Continuous',min_value=0,max_value=1}",
            "xgboost has no hyperparameter",
        ),
        ("max_parallel_jobs=9", "max_parallel_jobs=9 is more than max_jobs=4"),
        ("early_stopping=Auto", "Hyperband stops poor jobs itself"),
        ("objective_metric=validation:error", "is never reported by this job"),
        ("constraints=['validation:auc > 0.5']", "'validation:auc > 0.5' is not a constraint"),
        (
            "objectives=[{metric='validation:auc',type='Maximize'},"
            "{metric='dollars',type='Minimize'}]",
            "objectives: 'dollars' is neither reported by this job",
        ),
        ("completion.when_bored=true", "unknown key 'completion.when_bored'"),
        (
            "completion.min_improvement_per_cost=-1",
            "completion.min_improvement_per_cost: Input should be greater than 0 (got -1)",
        ),
    ],
)
def test_bad_tuning_jobs_exit_2_and_start_nothing(
    store_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    override: str,
    expected: str,
) -> None:
    file = tmp_path / "tuning.toml"
    file.write_text(TUNING)
    code, _, err = _cli(capsys, "tune", str(file), "--set", override)
    assert code == 2
    assert expected in err
    assert _cli(capsys, "tuning", "list", "--json")[1].strip() == "[]"
    assert _cli(capsys, "jobs", "list", "--json")[1].strip() == "[]"


def test_tune_without_waiting_runs_on_in_the_background(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "tuning.toml"
    file.write_text(TUNING)
    code, out, _ = _cli(capsys, "tune", str(file), "--no-wait", "--json", "--set", "max_jobs=2")
    assert code == 0
    started = json.loads(out)
    assert started["status"] in ("Pending", "InProgress")

    def ended() -> bool:
        shown = json.loads(_cli(capsys, "tuning", "show", started["id"], "--json")[1])
        return bool(shown["status"] == "Completed")

    wait_until(ended, timeout=120)
    # The background runner, once it exits: by the pid it recorded. (Picked from this
    # process's children by command line, a child that ended meanwhile, a worker of the
    # session's backend say, raised NoSuchProcess.)
    from scaletune.api import Session

    with Session(store_path) as session:
        runner = session.store.get_tuning_job(started["id"]).controller_pid
    assert runner is not None
    with contextlib.suppress(psutil.NoSuchProcess):  # reaped already
        psutil.Process(runner).wait(timeout=30)
    shown = json.loads(_cli(capsys, "tuning", "show", started["id"], "--json")[1])
    assert sum(shown["job_counts"].values()) == 2
    log = store_path.parent / "tuning" / f"{started['id']}.log"
    assert log.exists()


def test_replay_runs_a_stored_tuning_job_again_with_another_strategy(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaletune.analysis import summarize
    from scaletune.api import Session
    from scaletune.simulation import simulate_tuning
    from tests.simulation.test_replay import ToySource, _spec

    with Session(store_path) as session:
        original = simulate_tuning(_spec(max_jobs=8), ToySource(), session.store)
        counts = summarize(session.store, original.id).job_counts
    assert counts["Stopped"] > 0
    code, out, _ = _cli(capsys, "tuning", "replay", original.id, "--json")
    assert code == 0
    same = json.loads(out)
    assert same["id"] != original.id
    assert same["best_objective"] == original.best_objective
    assert same["job_counts"] == dict(counts)
    code, out, _ = _cli(
        capsys, "tuning", "replay", original.id, "--set", "strategy=Random", "--json"
    )
    assert code == 0
    random = json.loads(out)
    assert random["strategy"] == "Random"
    with Session(store_path) as session:
        reasons = [
            trial.failure_reason or ""
            for trial in session.store.training_jobs_of(random["id"])
            if trial.status.value == "Stopped"
        ]
    # No scheduler stops anything; a trial whose nearest recorded curve was cut short by the
    # original's Hyperband ends where that curve ends, and says so.
    assert all(reason.startswith("as recorded: bracket") for reason in reasons)
    code, _, err = _cli(capsys, "tuning", "replay", original.id, "--set", "max_jobs=0")
    assert code == 2
    assert "max_jobs" in err and len(err.strip().splitlines()) == 1
    code, _, err = _cli(capsys, "tuning", "replay", "nope")
    assert code == 2 and "nope" in err


def test_tuning_rungs_tells_which_first_rung_keeps_the_winner(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaletune.api import Session
    from tests.simulated import hand_ranked_job

    with Session(store_path) as session:
        tuning_id = hand_ranked_job(session.store).id
    code, out, _ = _cli(capsys, "tuning", "rungs", tuning_id)
    assert code == 0
    rows = [line.split() for line in out.splitlines()]
    assert ["1", "4", "4", "-0.33", "2", "no"] in rows
    assert ["3", "4", "4", "+1.00", "1", "yes"] in rows
    said = " ".join(out.split())  # the lines below the table wrap at 80 columns
    assert (
        f"winner: {tuning_id}-" in said
        and "(score 0.9 at step 9, of 4 trials that ran to their end)" in said
    )
    assert "the winner would have been dropped at rung 1; min_resource = 3 would have" in said
    code, out, _ = _cli(capsys, "tuning", "rungs", tuning_id, "--min-resource", "3", "--json")
    assert code == 0
    report = json.loads(out)
    assert [rung["resource"] for rung in report["rungs"]] == [3]
    assert report["safe_first_rung"] == 3
    code, out, _ = _cli(capsys, "tuning", "rungs", tuning_id, "--min-resource", "3")
    assert code == 0 and "every rung that judged the winner kept it" in " ".join(out.split())
    code, out, _ = _cli(capsys, "tuning", "rungs", tuning_id, "--eta", "8")
    assert code == 0
    said = " ".join(out.split())
    assert "even the last rung that judged the winner (1) would have dropped it" in said
    code, _, err = _cli(capsys, "tuning", "rungs", tuning_id, "--eta", "1")
    assert code == 2 and "--eta" in err
    code, _, err = _cli(capsys, "tuning", "rungs", "nope")
    assert code == 2 and "nope" in err and len(err.strip().splitlines()) == 1
    code, _, err = _cli(capsys, "tuning", "rungs", tuning_id, "--rank-by", "median")
    assert code == 2 and "'median'" in err and len(err.strip().splitlines()) == 1


def test_tuning_rungs_ranks_forecasts_when_asked(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaletune.api import Session
    from tests.simulated import SLOW_AND_FAST, hand_ranked_job

    with Session(store_path) as session:
        tuning_id = hand_ranked_job(session.store, curves=SLOW_AND_FAST).id
    asked = ("tuning", "rungs", tuning_id, "--min-resource", "4")
    code, out, _ = _cli(capsys, *asked)
    assert code == 0 and ["4", "2", "2", "-1.00", "2", "no"] in [
        r.split() for r in out.splitlines()
    ]
    code, out, _ = _cli(capsys, *asked, "--rank-by", "forecast")
    assert code == 0 and ["4", "2", "2", "+1.00", "1", "yes"] in [
        r.split() for r in out.splitlines()
    ]
    assert "Rungs ranked forecasts at step 27 (none before a trial's 4th report)." in " ".join(
        out.split()
    )


def test_tuning_show_prints_the_pareto_front_and_the_target(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaletune.api import Session
    from tests.analysis.test_tradeoffs import _grid, _run

    with Session(store_path) as session:
        tuning_id = _run(session.store, _grid(target_objective=0.7, max_parallel_jobs=9))
    code, out, _ = _cli(capsys, "tuning", "show", tuning_id, "--json")
    assert code == 0
    shown = json.loads(out)
    assert [p["instance_count"] for p in shown["pareto_front"]] == [1, 2, 3]
    assert shown["target"]["cheapest"]["instance_count"] == 1
    code, out, _ = _cli(capsys, "tuning", "show", tuning_id)
    assert code == 0
    assert "maximize accuracy, minimize billable_seconds" in out
    assert "Pareto front: 3 completed trial(s)" in out
    assert "target accuracy 0.7" in out and "cheapest" in out and "fastest" in out


def test_tuning_show_says_why_a_completed_job_ended(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaletune.api import Session
    from tests.simulated import simulated_tuning

    with Session(store_path) as session:
        ran_out = simulated_tuning(session.store, 12)
        converged = simulated_tuning(session.store, 200, completion={"convergence": True})
    shown = json.loads(_cli(capsys, "tuning", "show", ran_out.id, "--json")[1])
    assert shown["completion_reason"] == "max_jobs=12 reached"
    code, out, _ = _cli(capsys, "tuning", "show", converged.id)
    assert code == 0
    assert converged.completion_reason is not None
    assert converged.completion_reason.startswith("converged:")
    # the rule's sentence on its own row, beside the status
    assert f"ended {converged.completion_reason}" in " ".join(out.split())


# Asynchronous PBT ranks the members running: a member can be copied only while another
# reports beside it. At 30 epochs of 32-row batches (1 s of reports) a clean-clone run saw the
# two train apart, their workers' start-up spread on a busy machine, and no copy. Batches of 8
# (4 s of reports alone) bound that spread; the failure message shows the overlap.
def test_the_pbt_example_runs_and_analytics_show_the_lineage(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "tuning-pbt-digits.toml"
    code, out, err = _cli(
        capsys,
        "tune",
        str(example),
        "--json",
        "--set",
        "max_jobs=5",
        "--set",
        "max_parallel_jobs=2",
        "--set",
        "training.hyperparameters.epochs=6",
        "--set",
        "training.hyperparameters.batch_size=8",
        "--set",
        "pbt.perturbation_interval=2",
        "--set",
        "training.checkpoint.every_steps=40",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["status"], summary["strategy"]) == ("Completed", "PBT")
    csv = tmp_path / "trials.csv"
    assert _cli(capsys, "tuning", "analytics", summary["id"], "--csv", str(csv))[0] == 0
    frame = pd.read_csv(csv)
    children = frame[frame["ParentTrial"].notna()]
    # Two members, ranked together at epochs 2 and 4: the worse is copied over.
    shown = ["TrainingJobStatus", "TrainingStartTime", "TrainingEndTime", "StopReason"]
    assert len(children) >= 1, frame[shown].to_string()
    # Every copy started: a donor that pruned the checkpoint a copy was reading is asked again.
    assert (frame["TrainingJobStatus"] != "Failed").all(), frame[shown].to_string()
    assert set(children["ParentTrial"].astype(int)) <= set(range(len(frame)))
    assert (frame["learning_rate"] > 0).all()


TUNING_ONE_WORKER = """
objective_metric = "validation:accuracy"
strategy = "Random"
max_jobs = 2
max_parallel_jobs = 1

[ranges]
learning_rate = { type = "Continuous", min_value = 0.01, max_value = 0.2, scaling = "Logarithmic" }

[training]
algorithm = "dnn"
instance_count = 1
hyperparameters = { hidden_units = 16, epochs = 2, batch_size = 32, optimizer = "sgd" }
channels.train = { dataset = "digits" }
channels.validation = { dataset = "digits" }
"""


def test_the_best_settings_of_one_worker_run_on_two_with_adascale(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "tuning.toml"
    file.write_text(TUNING_ONE_WORKER)
    code, out, _ = _cli(capsys, "tune", str(file), "--json")
    assert code == 0
    summary = json.loads(out)
    best_rate = summary["best_hyperparameters"]["learning_rate"]
    job_file = tmp_path / "job.toml"
    job_file.write_text(
        'algorithm = "dnn"\ninstance_count = 1\n'
        "hyperparameters = { hidden_units = 16, epochs = 2, learning_rate = 0.5 }\n"
        'channels.train = { dataset = "digits" }\nchannels.validation = { dataset = "digits" }\n'
    )
    code, out, err = _cli(
        capsys,
        "train",
        str(job_file),
        "--best-of",
        summary["id"],
        "--set",
        "instance_count=2",
        "--set",
        "hyperparameters.lr_scaling=adascale",
        "--json",
    )
    assert code == 0, err
    job = json.loads(out)
    assert job["status"] == "Completed" and job["instance_count"] == 2
    assert job["hyperparameters"]["learning_rate"] == pytest.approx(best_rate)  # not 0.5
    assert job["hyperparameters"]["lr_scaling"] == "adascale"
    assert "adascale:gain" in job["final_metrics"]

    code, _, err = _cli(capsys, "train", str(job_file), "--best-of", "tuning-nope")
    assert code == 2 and err.count("\n") == 1 and "tuning-nope" in err
