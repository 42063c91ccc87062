"""Users' own scripts as training and tuning jobs: real 2-3 worker groups."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from scaletune.analysis import summarize
from scaletune.api import Session
from scaletune.errors import InvalidInputError
from scaletune.reporting import REPORT_ENV, REPORT_PREFIX, report
from scaletune.spec import (
    load_training_spec,
    load_tuning_spec,
    training_spec_from_dict,
    tuning_spec_from_dict,
)
from scaletune.store import JobStatus, TrainingJobRecord
from scaletune.training import Stopper
from scaletune.tuning import TuningController
from scaletune.worker import Report
from tests.cli.test_cli import _cli
from tests.conftest import wait_until

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _run(session: Session, spec: Any) -> TrainingJobRecord:
    return session.controller.run(session.controller.prepare(spec))


def _script_job(tmp_path: Path, source: str, **fields: Any) -> Any:
    (tmp_path / "job.py").write_text(source)
    return training_spec_from_dict(
        {
            "algorithm": "script",
            "instance_count": fields.pop("instance_count", 2),
            "script": {
                "entry_point": "job.py",
                "source_dir": str(tmp_path),
                **fields.pop("script", {}),
            },
            **fields,
        }
    )


SPRINT = """
import scaletune
for step in range(1, 201):
    scaletune.report(step, loss=1.0 / step)
"""
SPRINT_THAT_CHECKS = """
import scaletune
stop = scaletune.StopRequest()
for step in range(1, 201):
    scaletune.report(step, loss=1.0 / step)
    if stop.requested:
        break
"""


@pytest.mark.parametrize(
    ("source", "verdict"),
    [(SPRINT, "stop"), (SPRINT_THAT_CHECKS, "stop"), (SPRINT, "go on")],
    ids=["killed-by-the-stop", "ends-at-the-stop", "goes-on"],
)
def test_a_script_waits_at_a_rung_for_a_slow_verdict(
    session: Session, tmp_path: Path, source: str, verdict: str
) -> None:
    # 200 reports take milliseconds: a verdict slower than that, as on a busy machine, used
    # to reach a script that had ended, Completed instead of Stopped at its rung.
    spec = _script_job(tmp_path, source, instance_count=1)
    job = dataclasses.replace(session.controller.prepare(spec), judged_steps=frozenset({3}))
    stop = Stopper()

    def judge(report: Report) -> None:
        if report.step == 3:
            time.sleep(0.5)  # the tuner, slow to decide: the script waits in scaletune.report
            if verdict == "stop":
                stop.request(JobStatus.STOPPED, "rung 3: not in the best 1 of 3", early=True)

    record = session.controller.run(job, stop, on_report=judge)
    steps = [point.step for point in session.store.metrics(record.id, "loss")]
    if verdict == "stop":
        assert record.status is JobStatus.STOPPED, record.failure_reason
        assert steps == [1, 2, 3]
    else:  # told to go on at once, not after the wait's 60-s bound
        assert record.status is JobStatus.COMPLETED, record.failure_reason
        assert steps == list(range(1, 201))
        assert (record.wall_seconds or 0) < 30


def test_a_plain_ddp_script_runs_on_two_workers(session: Session) -> None:
    record = _run(
        session, load_training_spec(EXAMPLES / "script-ddp.toml", ["hyperparameters.epochs=2"])
    )
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert list(p.step for p in session.store.metrics(record.id, "validation:accuracy")) == [1, 2]
    assert record.final_metrics["validation:accuracy"] > 0.8
    assert (Path(record.artifact or "") / "model.pt").exists()


def test_an_xgboost_script_joins_the_tracker_on_three_workers(session: Session) -> None:
    record = _run(session, load_training_spec(EXAMPLES / "script-xgboost.toml"))
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert len(session.store.metrics(record.id, "validation:auc")) == 20
    assert record.final_metrics["validation:auc"] > 0.9
    assert (Path(record.artifact or "") / "model.json").exists()


def test_printed_metrics_are_read_by_regex_from_rank_0_only(session: Session) -> None:
    record = _run(session, load_training_spec(EXAMPLES / "script-print.toml"))
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    scores = session.store.metrics(record.id, "validation:score")
    # Three ranks print the same lines; only rank 0's count, so each step appears once.
    assert [p.step for p in scores] == list(range(1, 11))
    losses = session.store.metrics(record.id, "train:loss")
    assert [p.step for p in losses] == list(range(1, 11))  # no step group: a counter


def test_the_environment_and_hyperparameters_reach_the_script(
    session: Session, tmp_path: Path
) -> None:
    spec = _script_job(
        tmp_path,
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "keys = ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT', 'TF_CONFIG']\n"
        "seen = {k: os.environ[k] for k in keys}\n"
        "seen['argv'] = sys.argv[1:]\n"
        "seen['json'] = json.loads(Path(os.environ['SCALETUNE_HYPERPARAMETERS']).read_text())\n"
        "out = Path(os.environ['SCALETUNE_MODEL_DIR'])\n"
        "(out / f\"seen-{os.environ['RANK']}.json\").write_text(json.dumps(seen))\n",
        hyperparameters={"eta": 0.1, "layers": ["a", "b"], "deep": True},
    )
    record = _run(session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    seen = json.loads((Path(record.artifact or "") / "seen-0.json").read_text())
    assert (seen["RANK"], seen["WORLD_SIZE"], seen["LOCAL_RANK"]) == ("0", "2", "0")
    assert seen["argv"] == ["--eta", "0.1", "--layers", "a,b", "--deep", "true"]
    assert seen["json"] == {"eta": 0.1, "layers": ["a", "b"], "deep": True}
    tf_config = json.loads(seen["TF_CONFIG"])
    assert tf_config["task"] == {"type": "worker", "index": 0}
    assert len(tf_config["cluster"]["worker"]) == 2
    assert not (Path(record.artifact or "") / "seen-1.json").exists()  # only rank 0 publishes


def test_a_script_failing_on_one_rank_fails_the_job_with_its_stderr(
    session: Session, tmp_path: Path
) -> None:
    spec = _script_job(
        tmp_path,
        "import os, sys, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    print('cannot open the data', file=sys.stderr)\n"
        "    sys.exit(3)\n"
        "time.sleep(60)\n",
    )
    record = _run(session, spec)
    assert record.status is JobStatus.FAILED
    assert record.failure_reason == (
        "worker 1 failed: ScriptError: job.py exited with code 3: cannot open the data"
    )


@pytest.mark.parametrize(
    ("signal_name", "said"),
    [
        # Its own crash (a C++ library's std::terminate): its last words say why.
        ("SIGABRT", ": terminate called after throwing gloo::IoException | what(): closed"),
        ("SIGKILL", ""),  # a kill from outside: what it last wrote says nothing of it
    ],
    ids=["crashed", "killed"],
)
def test_a_script_ended_by_a_signal_fails_with_its_last_words_when_it_crashed(
    session: Session, tmp_path: Path, signal_name: str, said: str
) -> None:
    spec = _script_job(
        tmp_path,
        "import os, signal, sys, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    print('terminate called after throwing gloo::IoException', file=sys.stderr)\n"
        "    print('  what(): closed', file=sys.stderr, flush=True)\n"
        f"    os.kill(os.getpid(), signal.{signal_name})\n"
        "time.sleep(60)\n",
        retry={"max_attempts": 0},
    )
    record = _run(session, spec)
    assert record.status is JobStatus.FAILED
    assert record.failure_reason == (
        f"worker 1 failed: ScriptError: job.py was killed by {signal_name}{said}"
    )


def test_a_regex_that_never_matches_leaves_the_job_without_that_metric(
    session: Session, tmp_path: Path
) -> None:
    spec = _script_job(
        tmp_path,
        "print('accuracy: 0.9')\n",
        script={"metric_definitions": [{"name": "validation:auc", "regex": r"auc=([0-9.]+)"}]},
    )
    record = _run(session, spec)
    assert record.status is JobStatus.COMPLETED
    assert record.final_metrics == {}


def test_a_nan_objective_is_rejected_recorded_and_the_job_goes_on(
    session: Session, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _script_job(
        tmp_path,
        "import scaletune\n"
        "scaletune.report(1, **{'validation:score': 0.5})\n"
        "scaletune.report(2, **{'validation:score': float('nan')})\n",
    )
    record = _run(session, spec)
    assert record.status is JobStatus.COMPLETED
    assert [p.step for p in session.store.metrics(record.id, "validation:score")] == [1]
    assert [(r.name, r.step, r.value) for r in session.store.rejected(record.id)] == [
        ("validation:score", 2, "nan")
    ]
    log = Path(record.log_dir or "") / "worker-0.log"
    assert "dropped non-finite metric validation:score=nan at step 2" in log.read_text()
    code, out, _ = _cli(capsys, "jobs", "show", record.id, "--json")
    assert code == 0
    assert json.loads(out)["rejected_metrics"] == [
        {
            "name": "validation:score",
            "step": 2,
            "value": "nan",
            "time": pytest.approx(session.store.rejected(record.id)[0].time),
        }
    ]
    code, out, _ = _cli(capsys, "jobs", "show", record.id)
    assert "validation:score=nan at step 2 (not finite: not recorded)" in " ".join(out.split())


def test_a_stop_ends_the_script_and_its_children(session: Session, tmp_path: Path) -> None:
    spec = _script_job(
        tmp_path,
        "import subprocess, sys, time, scaletune\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print('child', child.pid, flush=True)\n"
        "scaletune.report(1, **{'validation:score': 0.1})\n"
        "time.sleep(600)\n",
    )
    job = session.controller.prepare(spec)
    from scaletune.training import Stopper

    stopper = Stopper()
    import threading

    finished: list[TrainingJobRecord] = []
    thread = threading.Thread(target=lambda: finished.append(session.controller.run(job, stopper)))
    thread.start()
    wait_until(lambda: len(session.store.metrics(job.id)) > 0, timeout=60)
    log = job.paths.log_path(0)
    child = int(
        next(line for line in log.read_text().splitlines() if line.startswith("child")).split()[1]
    )
    stopper.request()
    thread.join(60)
    assert finished[0].status is JobStatus.STOPPED
    wait_until(
        lambda: (
            not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
        ),
        timeout=10,
    )


def test_a_script_leads_its_own_process_group_in_its_workers_session(
    session: Session, tmp_path: Path
) -> None:
    # Its own group, so a stop reaches its children; its worker's session, so the kernel's
    # autogroup scheduling does not put each rank's script in a scheduling group of its own.
    spec = _script_job(
        tmp_path,
        "import json, os\n"
        "from pathlib import Path\n"
        "seen = {'pid': os.getpid(), 'group': os.getpgid(0), 'session': os.getsid(0),\n"
        "        'worker_session': os.getsid(os.getppid()),\n"
        "        'stdin': os.readlink('/proc/self/fd/0')}\n"
        "Path(os.environ['SCALETUNE_MODEL_DIR'], 'seen.json').write_text(json.dumps(seen))\n",
    )
    record = _run(session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    seen = json.loads((Path(record.artifact or "") / "seen.json").read_text())
    assert seen["group"] == seen["pid"]
    assert seen["session"] == seen["worker_session"] != seen["pid"]
    assert seen["stdin"] == "/dev/null"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ({"entry_point": "missing.py"}, "missing.py' does not exist"),
        (
            {"entry_point": "job.py", "metric_definitions": [{"name": "m", "regex": "(unclosed"}]},
            "does not compile",
        ),
        (
            {"entry_point": "job.py", "metric_definitions": [{"name": "m", "regex": "no group"}]},
            "needs a group around the value",
        ),
    ],
)
def test_bad_scripts_are_refused_before_anything_starts(
    tmp_path: Path, script: dict[str, Any], message: str
) -> None:
    (tmp_path / "job.py").write_text("pass\n")
    with pytest.raises(InvalidInputError, match=message):
        training_spec_from_dict(
            {"algorithm": "script", "script": {**script, "source_dir": str(tmp_path)}}
        )


def test_report_is_a_no_op_outside_scaletune(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REPORT_ENV, raising=False)
    report(1, loss=0.5)
    assert capsys.readouterr().out == ""
    monkeypatch.setenv(REPORT_ENV, "stdout")
    report(2, loss=0.25)
    line = capsys.readouterr().out
    assert line.startswith(REPORT_PREFIX)
    assert json.loads(line[len(REPORT_PREFIX) :]) == {"step": 2, "metrics": {"loss": 0.25}}


@pytest.mark.parametrize(
    ("example", "overrides"),
    [
        ("tuning-script-print.toml", ["max_jobs=6"]),
        ("tuning-script-ddp.toml", ["max_jobs=3"]),
        ("tuning-script-xgboost.toml", ["max_jobs=3", "training.instance_count=2"]),
    ],
)
def test_each_example_tunes_with_hyperband(
    session: Session, example: str, overrides: list[str]
) -> None:
    # Rungs rank values: a verdict lands at the first rung (a forecast waits for 4 reports,
    # and with these few trials may stop none)
    spec = load_tuning_spec(EXAMPLES / example, [*overrides, "hyperband.rank_by='value'"])
    controller = TuningController(session.controller)
    tuning_id = controller.create(spec)
    controller.run(tuning_id, spec)
    summary = summarize(session.store, tuning_id)
    assert summary.record.status.value == "Completed"
    assert summary.job_counts["Failed"] == 0
    assert summary.record.best_objective is not None
    # Trials and their values are seeded; each example runs long enough per step for a
    # verdict to land before the trial ends.
    assert summary.job_counts["Stopped"] >= 1


def test_another_rank_can_be_the_one_that_reports(session: Session, tmp_path: Path) -> None:
    spec = _script_job(
        tmp_path,
        "import os\nprint(f\"rank={os.environ['RANK']}\")\n",
        instance_count=3,
        script={"metrics_rank": 2, "metric_definitions": [{"name": "who", "regex": r"rank=(\d+)"}]},
    )
    record = _run(session, spec)
    assert record.final_metrics == {"who": 2.0}
    with pytest.raises(InvalidInputError, match=r"script\.metrics_rank=3 but instance_count=3"):
        _script_job(tmp_path, "pass\n", instance_count=3, script={"metrics_rank": 3})


def test_a_command_as_entry_point(session: Session, tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(
        "import sys, scaletune\nscaletune.report(1, **{'args': float(len(sys.argv))})\n"
    )
    spec = training_spec_from_dict(
        {
            "algorithm": "script",
            "instance_count": 2,
            "script": {
                "entry_point": f"{sys.executable} -u job.py --fixed 'a b'",
                "source_dir": str(tmp_path),
            },
            "hyperparameters": {"eta": 0.5},
        }
    )
    record = _run(session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert record.final_metrics == {"args": 5.0}  # job.py --fixed 'a b' --eta 0.5


def test_each_worker_gets_its_shard_and_the_channel_source(
    session: Session, tmp_path: Path
) -> None:
    data = tmp_path / "train.csv"
    data.write_text("".join(f"{i % 2},{i}.5\n" for i in range(7)))
    spec = _script_job(
        tmp_path,
        "import json, os\n"
        "import numpy as np\n"
        "from pathlib import Path\n"
        "folder = Path(os.environ['SCALETUNE_CHANNEL_TRAIN'])\n"
        "seen = {key: os.environ[key] for key in ('SCALETUNE_CHANNEL_TRAIN_ROWS',\n"
        "        'SCALETUNE_CHANNEL_TRAIN_SOURCE', 'SCALETUNE_SHARD_INDEX',\n"
        "        'SCALETUNE_SHARD_COUNT')}\n"
        "seen['features'] = np.load(folder / 'features.npy').ravel().tolist()\n"
        "out = Path(os.environ['SCALETUNE_MODEL_DIR'])\n"
        "(out / 'seen.json').write_text(json.dumps(seen))\n",
        instance_count=3,
        channels={"train": {"path": str(data)}},
    )
    record = _run(session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    seen = json.loads((Path(record.artifact or "") / "seen.json").read_text())
    assert seen == {
        "SCALETUNE_CHANNEL_TRAIN_ROWS": "0:3",  # rank 0 of 3: rows 0, 1, 2 of 7
        "SCALETUNE_CHANNEL_TRAIN_SOURCE": str(data),
        "SCALETUNE_SHARD_INDEX": "0",
        "SCALETUNE_SHARD_COUNT": "3",
        "features": [0.5, 1.5, 2.5],
    }


def test_a_line_that_only_looks_like_a_report_is_an_ordinary_line(
    session: Session, tmp_path: Path
) -> None:
    spec = _script_job(
        tmp_path,
        "print('@@scaletune-report not json; loss=0.5')\n",
        script={"metric_definitions": [{"name": "train:loss", "regex": r"loss=([0-9.]+)"}]},
    )
    record = _run(session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert record.final_metrics == {"train:loss": 0.5}


def test_parallel_trials_run_their_scripts_on_a_share_of_the_cores(
    session: Session, tmp_path: Path
) -> None:
    (tmp_path / "job.py").write_text(
        "import os\n"
        "from scaletune.reporting import report\n"
        "report(1, threads=float(os.environ.get('OMP_NUM_THREADS', '0')), loss=1.0)\n"
    )
    spec = tuning_spec_from_dict(
        {
            "objective_metric": "loss",
            "objective_type": "Minimize",
            "strategy": "Random",
            "max_jobs": 2,
            "max_parallel_jobs": 2,
            "ranges": {"rate": {"type": "Continuous", "min_value": 0.1, "max_value": 1.0}},
            "training": {
                "algorithm": "script",
                "instance_count": 1,
                "script": {"entry_point": "job.py", "source_dir": str(tmp_path)},
            },
        }
    )
    controller = TuningController(session.controller)
    tuning_id = controller.create(spec)
    controller.run(tuning_id, spec)
    # Two one-worker trials at once: half the cores each, unless the user's environment says.
    expected = float(os.environ.get("OMP_NUM_THREADS") or max(1, (os.cpu_count() or 1) // 2))
    trials = session.store.training_jobs_of(tuning_id)
    assert [t.status for t in trials] == [JobStatus.COMPLETED] * 2, trials[0].failure_reason
    for trial in trials:
        assert [p.value for p in session.store.metrics(trial.id, "threads")] == [expected]
