from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from scaletune.api import Estimator, Session
from scaletune.cli import main
from tests.conftest import pid_alive, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    argv = sys.argv
    sys.argv = ["scaletune", *args]
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    finally:
        sys.argv = argv
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_train_json_then_list_show_and_logs(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(
        capsys,
        "train",
        str(EXAMPLES / "xgboost-csv.toml"),
        "--json",
        "--set",
        "instance_count=3",
        "--set",
        "hyperparameters.eta=0.1",
    )
    assert code == 0
    job = json.loads(out)
    assert job["status"] == "Completed"
    assert job["instance_count"] == 3
    assert job["hyperparameters"]["eta"] == 0.1
    assert job["billable_seconds"] == pytest.approx(3 * job["wall_seconds"])
    assert 0.9 < job["final_metrics"]["validation:auc"] <= 1.0
    assert Path(job["artifact"], "xgboost-model.json").exists()
    for key in ("id", "algorithm", "start_time", "end_time", "failure_reason"):
        assert key in job

    code, out, _ = _cli(capsys, "jobs", "show", job["id"], "--json")
    shown = json.loads(out)
    assert (code, shown["id"]) == (0, job["id"])
    (attempt,) = shown["attempts"]
    assert [where.split(" pid ")[0] for where in attempt["workers"]] == [socket.gethostname()] * 3
    code, out, _ = _cli(capsys, "jobs", "list", "--json")
    assert [entry["id"] for entry in json.loads(out)] == [job["id"]]
    code, out, _ = _cli(capsys, "jobs", "list")
    assert code == 0 and "Completed" in out
    code, out, _ = _cli(capsys, "jobs", "show", job["id"])
    assert "validation:auc" in out and f"3 on {socket.gethostname()}" in out
    code, out, _ = _cli(capsys, "jobs", "logs", job["id"], "--worker", "2")
    assert code == 0 and "Task 000002 got rank 2" in out
    code, out, _ = _cli(capsys, "jobs", "stop", job["id"])
    assert "already ended: Completed" in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["train", "absent.toml"], "job file 'absent.toml' does not exist"),
        (
            ["train", str(EXAMPLES / "xgboost-csv.toml"), "--set", "instance_count=0"],
            "instance_count: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            [
                "train",
                str(EXAMPLES / "xgboost-csv.toml"),
                "--set",
                "hyperparameters.max_depth=deep",
            ],
            "hyperparameters.max_depth",
        ),
        (
            ["train", str(EXAMPLES / "xgboost-csv.toml"), "--set", "instance_count={min=3,max=2}"],
            "instance_count: min=3 is more than max=2",
        ),
        (
            ["train", str(EXAMPLES / "xgboost-csv.toml"), "--set", "instance_count={min=0,max=2}"],
            "instance_count.min=0: from 1 to 256 workers",
        ),
        (["jobs", "show", "no-such-job"], "no training job with id 'no-such-job'"),
        (["jobs", "resize", "no-such-job", "2"], "no training job with id 'no-such-job'"),
        (["jobs", "logs", "no-such-job"], "no training job with id 'no-such-job'"),
        (["jobs", "list", "--store", "mysql://x/y"], "only sqlite and postgresql"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    store_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    code, out, err = _cli(capsys, *args)
    assert code == 2
    assert expected in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err + out


def test_bad_data_writes_nothing(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.csv").write_text("1,2\n0,x\n")
    job = tmp_path / "job.toml"
    job.write_text('algorithm = "xgboost"\n[channels]\ntrain = "train.csv"\n')
    code, _, err = _cli(capsys, "train", str(job))
    assert code == 2 and "line 2 column 2 is 'x'" in err
    assert _cli(capsys, "jobs", "list", "--json")[1].strip() == "[]"
    assert not (store_path.parent / "jobs").exists()


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "train")
    assert code == 2 and "Missing argument" in err


def test_ctrl_c_stops_the_job_and_its_workers(store_path: Path, tmp_path: Path) -> None:
    job_file = tmp_path / "long.toml"
    job_file.write_text(
        'algorithm = "xgboost"\ninstance_count = 2\n'
        "[hyperparameters]\nnum_round = 100000\nmax_depth = 2\n"
        '[channels.train]\ndataset = "breast-cancer"\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "scaletune", "train", str(job_file), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        # A shell's background job inherits SIGINT ignored, and Python keeps it so: restore
        # the default so that this test does not depend on how the suite was started.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        parent = psutil.Process(process.pid)
        # two workers and the fork server they were forked from
        wait_until(lambda: len(parent.children(recursive=True)) == 3, timeout=60)
        workers = [child.pid for child in parent.children(recursive=True)]
        wait_until(lambda: _metrics_exist(store_path), timeout=60)
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    record = json.loads(out)
    assert (record["status"], record["failure_reason"]) == ("Stopped", "interrupted (Ctrl-C)")
    assert not any(pid_alive(pid) for pid in workers)


def _metrics_exist(store_path: Path) -> bool:
    import sqlite3

    if not store_path.exists():
        return False
    with sqlite3.connect(store_path) as db:
        try:
            return bool(db.execute("select count(*) from metric_points").fetchone()[0])
        except sqlite3.OperationalError:
            return False


def test_jobs_stop_stops_a_running_job(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    channel = {"dataset": "breast-cancer"}
    job = Estimator(
        "xgboost", {"num_round": 100_000, "max_depth": 2}, instance_count=2, session=session
    ).fit({"train": channel}, wait=False)
    wait_until(lambda: len(job.metrics()) > 0)
    code, out, _ = _cli(capsys, "jobs", "stop", job.id)
    assert code == 0
    assert f"stop requested for job {job.id}" in out
    record = job.wait(timeout=60)
    assert (record.status.value, record.failure_reason) == ("Stopped", "stop requested")


def test_train_starts_an_elastic_job_at_the_size_the_machines_slots_allow(
    store_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALETUNE_LOCAL_SLOTS", "1")
    job = str(EXAMPLES / "xgboost-csv.toml")
    code, out, err = _cli(capsys, "train", job, "--set", "instance_count={min=1,max=2}")
    assert code == 0
    assert "1 to 2 workers (elastic), xgboost" in err
    assert "1 to 2 (elastic), 1 at first" in out
    monkeypatch.setenv("SCALETUNE_LOCAL_SLOTS", "one")
    code, _, err = _cli(capsys, "train", job)
    assert code == 2 and "SCALETUNE_LOCAL_SLOTS='one': give a number of workers" in err


def test_jobs_resize_asks_an_elastic_job_for_a_size_within_its_range(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaletune.store import NewTrainingJob

    store = session.store
    spec = {"algorithm": "dnn", "instance_count": 4, "min_instance_count": 2}
    store.create_training_job(NewTrainingJob("elastic", None, "dnn", spec, {}, 4, 1.0, ""))
    store.create_training_job(NewTrainingJob("fixed", None, "dnn", {}, {}, 4, 1.0, ""))
    store.mark_in_progress("elastic", 2.0, os.getpid(), socket.gethostname())

    code, out, _ = _cli(capsys, "jobs", "resize", "elastic", "3")
    assert code == 0
    assert "job elastic: asked for 3 workers; it goes on at that size from its next" in out
    assert store.requested_size("elastic") == 3
    code, out, _ = _cli(capsys, "jobs", "show", "elastic")
    assert "2 to 4 (elastic)" in out and "asked for 3 (jobs resize)" in out
    code, out, _ = _cli(capsys, "jobs", "show", "elastic", "--json")
    shown = json.loads(out)
    assert (shown["requested_size"], shown["sizes"]) == (3, [])

    for args, expected in [
        (("elastic", "5"), "workers=5: job 'elastic' trains on 2 to 4 workers"),
        (("elastic", "1"), "workers=1: job 'elastic' trains on 2 to 4 workers"),
        (("fixed", "2"), "job 'fixed' is not elastic: its instance_count is 4"),
    ]:
        code, _, err = _cli(capsys, "jobs", "resize", *args)
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1
    assert store.requested_size("elastic") == 3  # nothing written by a refused ask
    assert store.requested_size("fixed") is None


def test_jobs_notice_tells_a_running_job_that_a_workers_machine_goes(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaletune.store import JobOutcome, JobStatus, NewTrainingJob

    store = session.store
    spec = {"algorithm": "dnn", "instance_count": 3, "cluster": {"notice_seconds": 45}}
    store.create_training_job(NewTrainingJob("running", None, "dnn", spec, {}, 3, 1.0, ""))
    store.create_training_job(NewTrainingJob("pending", None, "dnn", spec, {}, 3, 1.0, ""))
    store.mark_in_progress("running", 2.0, os.getpid(), socket.gethostname())
    store.attempts.start("running", 1, 2.0)
    store.attempts.set_workers("running", 1, ["here pid 1", "here pid 2", "here pid 3"])

    code, out, _ = _cli(capsys, "jobs", "notice", "running", "--worker", "2")
    assert code == 0
    assert "job running: worker 2's machine goes in 45 s" in out  # the job's notice_seconds
    code, out, _ = _cli(capsys, "jobs", "notice", "running", "--worker", "0", "--seconds", "90")
    assert code == 0
    notices = store.notices.of("running")
    assert [(n.attempt, n.rank, n.seconds, n.source) for n in notices] == [
        (1, 2, 45.0, "jobs notice"),
        (1, 0, 90.0, "jobs notice"),
    ]
    code, out, _ = _cli(capsys, "jobs", "show", "running", "--json")
    assert [n["rank"] for n in json.loads(out)["notices"]] == [2, 0]
    code, out, _ = _cli(capsys, "jobs", "show", "running")
    assert "worker 2 (attempt 1): jobs notice at" in out

    store.create_training_job(NewTrainingJob("waiting", None, "dnn", spec, {}, 3, 1.0, ""))
    store.mark_in_progress("waiting", 2.0, os.getpid(), socket.gethostname())
    store.create_training_job(NewTrainingJob("ended", None, "dnn", spec, {}, 3, 1.0, ""))
    store.finish_training_job("ended", JobOutcome(JobStatus.COMPLETED, 1.0, 2.0, 3.0, 6.0, {}))
    for args, expected in [
        (("running", "--worker", "3"), "--worker 3: job 'running' runs ranks 0 to 2"),
        (("running", "--worker", "-1"), "--worker -1: job 'running' runs ranks 0 to 2"),
        (("running", "--worker", "1", "--seconds", "0"), "--seconds 0: a notice gives more"),
        (("running", "--worker", "1", "--seconds", "-5"), "--seconds -5: a notice gives more"),
        (("pending", "--worker", "0"), "job 'pending' is Pending: only a running job's"),
        (("ended", "--worker", "0"), "job 'ended' is Completed: only a running job's"),
        (("waiting", "--worker", "0"), "job 'waiting' has no workers placed yet"),
        (("no-such-job", "--worker", "0"), "no training job with id 'no-such-job'"),
    ]:
        code, out, err = _cli(capsys, "jobs", "notice", *args)
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in out + err
    assert len(store.notices.of("running")) == 2  # nothing written by a refused notice


def test_jobs_stop_ends_a_paused_trial_as_stopped(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Paused trial (promotion-type Hyperband) has no workers to ask: it becomes Stopped at
    once, and its tuning job will not promote it."""
    from scaletune.store import JobOutcome, JobStatus, NewTrainingJob

    store = session.store
    store.create_training_job(
        NewTrainingJob("t-000", None, "xgboost", {}, {}, 2, 1.0, "", "t", trial_number=0)
    )
    store.finish_training_job(
        "t-000",
        JobOutcome(JobStatus.PAUSED, 1.0, 2.0, 1.0, 2.0, {}, failure_reason="bracket 0 rung 1"),
    )
    code, out, _ = _cli(capsys, "jobs", "stop", "t-000")
    assert code == 0
    assert "job t-000 was paused; now Stopped" in out
    record = store.get_training_job("t-000")
    assert (record.status, record.failure_reason) == (
        JobStatus.STOPPED,
        "stopped while paused (jobs stop): it will not be promoted",
    )
    assert (record.end_time, record.billable_seconds) == (2.0, 2.0)  # the pause's, kept
    code, out, _ = _cli(capsys, "jobs", "stop", "t-000")
    assert "already ended: Stopped" in out


def test_prices_kept_in_the_store_price_the_jobs_whose_file_gives_none(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaletune.store import JobOutcome, JobStatus, NewTrainingJob

    store = session.store
    store.create_training_job(NewTrainingJob("spot-job", None, "dnn", {}, {}, 3, 1.0, ""))
    billed = {"on-demand": 10.0, "spot": 20.0}
    done = JobOutcome(JobStatus.COMPLETED, 1.0, 11.0, 10.0, 30.0, {}, billable_by_class=billed)
    store.finish_training_job("spot-job", done)
    code, out, _ = _cli(capsys, "prices")
    assert code == 0 and "no prices set" in out
    code, out, _ = _cli(capsys, "jobs", "show", "spot-job", "--json")
    assert json.loads(out)["cost_by_class"] is None
    code, out, _ = _cli(capsys, "prices", "--on-demand", "1", "--spot", "0.3")
    assert code == 0 and "a worker-second costs 1 on on-demand, 0.3 on spot" in out
    code, out, _ = _cli(capsys, "jobs", "show", "spot-job", "--json")
    assert json.loads(out)["cost_by_class"] == pytest.approx({"on-demand": 10.0, "spot": 6.0})
    code, out, _ = _cli(capsys, "jobs", "show", "spot-job")
    assert "30.00 worker-seconds (10.00 on-demand, 20.00 spot)" in out
    assert "16 (on-demand 10, spot 6)" in out
    for args, expected in [
        (("--on-demand", "1"), "give --on-demand and --spot together"),
        (("--on-demand", "-1", "--spot", "0.3"), "--on-demand -1: a price is 0 or more"),
        (("--clear", "--spot", "1", "--on-demand", "1"), "--clear forgets the prices"),
    ]:
        code, _, err = _cli(capsys, "prices", *args)
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1
    code, out, _ = _cli(capsys, "prices", "--clear", "--json")
    assert code == 0 and json.loads(out) == {"prices": None}
