from __future__ import annotations

import dataclasses
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from scaletune.algorithms.xgboost import XGBoostAlgorithm
from scaletune.api import Session
from scaletune.cluster import FixedSlots, LocalBackend
from scaletune.errors import InvalidInputError
from scaletune.spec import CapacityClass, TrainingJobSpec, training_spec_from_dict
from scaletune.store import JobStatus, TrainingJobRecord
from scaletune.training import Stopper, reconcile_orphan
from scaletune.worker import RendezvousNeeds, Report, WorkerProgram
from tests.cli.test_cli import _cli
from tests.cluster import programs
from tests.conftest import pid_alive, wait_until


def _spec(**fields: Any) -> TrainingJobSpec:
    channel = {"dataset": "breast-cancer"}
    raw: dict[str, Any] = {
        "algorithm": "xgboost",
        "instance_count": 3,
        "hyperparameters": {"num_round": 5, "eval_metric": "auc"},
        "channels": {"train": channel, "validation": channel},
    }
    raw.update(fields)
    return training_spec_from_dict(raw)


class _ProgramOverride(XGBoostAlgorithm):
    """An XGBoost job whose workers run another program. `tracker=False` for a stand-in that
    never meets XGBoost's tracker: one started would hold a completed job 10 s at its end,
    waiting for workers that never came."""

    def __init__(self, program: WorkerProgram, *, tracker: bool = True) -> None:
        self._program = program
        self._tracker = tracker

    @property
    def program(self) -> WorkerProgram:
        return self._program

    def rendezvous_needs(self, spec: TrainingJobSpec) -> RendezvousNeeds:
        return RendezvousNeeds(collective_tracker=self._tracker)


def _run_in_thread(session: Session, spec: TrainingJobSpec, program: WorkerProgram | None = None):
    job = session.controller.prepare(spec)
    if program is not None:
        job = dataclasses.replace(job, algorithm=_ProgramOverride(program))
    groups: list[Any] = []
    result: list[TrainingJobRecord] = []
    thread = threading.Thread(
        target=lambda: result.append(session.controller.run(job, on_started=groups.append))
    )
    thread.start()
    wait_until(lambda: bool(groups))
    return job, groups[0], thread, result


def test_a_completed_job_is_recorded_with_billing_and_model(session: Session) -> None:
    job = session.controller.prepare(_spec())
    assert session.store.get_training_job(job.id).status is JobStatus.PENDING
    record = session.controller.run(job)
    assert record.status is JobStatus.COMPLETED
    assert record.failure_reason is None
    assert record.billable_seconds == pytest.approx(3 * (record.wall_seconds or 0))
    assert record.end_time == pytest.approx((record.start_time or 0) + (record.wall_seconds or 0))
    assert set(record.final_metrics) == {"train:auc", "validation:auc"}
    assert [p.step for p in session.store.metrics(job.id, "validation:auc")] == [1, 2, 3, 4, 5]
    assert (Path(record.artifact or "") / "xgboost-model.json").exists()


def test_billing_is_kept_per_capacity_class_and_priced(
    session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    # An elastic job of 2 to 3 workers on mixed capacity: its 2 fewest on-demand, 1 spot.
    spec = _spec(
        instance_count={"min": 2, "max": 3},
        cluster={"capacity": "mixed", "prices": {"on_demand": 1.0, "spot": 0.3}},
    )
    record = session.controller.run(session.controller.prepare(spec))
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    wall, billed = record.wall_seconds or 0.0, record.billable_by_class or {}
    assert billed == pytest.approx({"on-demand": 2 * wall, "spot": wall})
    assert record.billable_seconds == pytest.approx(3 * wall)
    assert record.cost_by_class == pytest.approx({"on-demand": 2 * wall, "spot": 0.3 * wall})
    shown = record.to_json_dict()
    assert shown["billable_by_class"] == billed
    assert shown["cost_by_class"] == record.cost_by_class
    on_demand = session.controller.run(session.controller.prepare(_spec()))
    assert on_demand.billable_by_class == {"on-demand": on_demand.billable_seconds}
    assert on_demand.cost_by_class is None  # no prices given: worker-seconds alone
    code, out, _ = _cli(capsys, "jobs", "show", record.id)
    assert code == 0
    assert f"{2 * wall:.2f} on-demand, {wall:.2f} spot" in out
    costs = record.cost_by_class or {}
    total, on, spot = sum(costs.values()), costs["on-demand"], costs["spot"]
    assert f"{total:.6g} (on-demand {on:.6g}, spot {spot:.6g})" in out


def test_a_mixed_job_takes_what_slots_named_by_class_offer(
    store_path: Path, tmp_path: Path
) -> None:
    # One on-demand slot and one spot: a mixed job of 1 to 3 workers runs on 2, its rank 0
    # on-demand and rank 1 spot.
    slots = FixedSlots(2, {CapacityClass.ON_DEMAND: 1, CapacityClass.SPOT: 1})
    spec = _spec(instance_count={"min": 1, "max": 3}, cluster={"capacity": "mixed"})
    with LocalBackend(slots=slots) as backend, Session(store_path, backend=backend) as session:
        record = session.controller.run(session.controller.prepare(spec))
        assert record.status is JobStatus.COMPLETED, record.failure_reason
        assert [a.size for a in session.store.attempts.of(record.id)] == [2]
    wall = record.wall_seconds or 0.0
    assert record.billable_by_class == pytest.approx({"on-demand": wall, "spot": wall})


@pytest.mark.parametrize(
    ("program", "status"),
    [
        (programs.finish_as_the_stop_arrives, JobStatus.COMPLETED),
        (programs.report_until_stopped, JobStatus.PAUSED),
    ],
    ids=["ran-to-its-end", "stopped-by-it"],
)
def test_a_pause_holds_only_if_the_program_stopped_for_it(
    session: Session, program: WorkerProgram, status: JobStatus
) -> None:
    job = session.controller.prepare(_spec(instance_count=2))
    job = dataclasses.replace(job, algorithm=_ProgramOverride(program, tracker=False))
    stop = Stopper()
    result: list[TrainingJobRecord] = []
    thread = threading.Thread(target=lambda: result.append(session.controller.run(job, stop)))
    thread.start()
    wait_until(lambda: bool(session.store.metrics(job.id)))
    stop.request(JobStatus.PAUSED, "paused at a rung")
    thread.join(60)
    record = result[0]
    assert record.status is status, record.failure_reason
    # Completed, it is complete: its model is published, and no promotion runs it again.
    finished = Path(record.artifact or "") / "finished.txt"
    assert finished.exists() is (status is JobStatus.COMPLETED)


def test_a_raising_worker_fails_the_job_and_ends_the_others(session: Session) -> None:
    _job, group, thread, result = _run_in_thread(session, _spec(), programs.raise_on_rank_one)
    thread.join(60)
    record = result[0]
    assert record.status is JobStatus.FAILED
    assert record.failure_reason == "worker 1 failed: ValueError: bad shard on rank 1"
    assert record.artifact is None
    assert not any(pid_alive(pid) for pid in group.pids)
    log = Path(record.log_dir or "") / "worker-1.log"
    assert "Traceback" in log.read_text()


def test_a_worker_killed_mid_job_fails_the_job(session: Session) -> None:
    spec = _spec(retry={"max_attempts": 0})  # retries have tests of their own
    job, group, thread, result = _run_in_thread(session, spec, programs.block_until_killed)
    wait_until(lambda: bool(session.store.metrics(job.id)))
    subprocess.run(["kill", "-KILL", str(group.pids[2])], check=True)
    thread.join(60)
    record = result[0]
    assert record.status is JobStatus.FAILED
    assert record.failure_reason == "worker 2 exited unexpectedly (killed by SIGKILL)"
    assert not any(pid_alive(pid) for pid in group.pids)
    assert record.end_time is not None and record.billable_seconds is not None
    assert [p.name for p in session.store.metrics(job.id)] == ["ready"]


def test_a_stop_request_in_the_store_stops_the_job(session: Session) -> None:
    session.controller.timing.stop_grace_seconds = 0.5  # this program never checks: killed after it
    job, group, thread, result = _run_in_thread(session, _spec(), programs.block_until_killed)
    wait_until(lambda: bool(session.store.metrics(job.id)))
    session.store.request_stop(job.id)  # what `scaletune jobs stop` does from another process
    thread.join(60)
    assert result[0].status is JobStatus.STOPPED
    assert result[0].failure_reason == "stop requested"
    assert not any(pid_alive(pid) for pid in group.pids)


def test_max_runtime_stops_the_job(session: Session) -> None:
    session.controller.timing.stop_grace_seconds = 0.5  # this program never checks: killed after it
    spec = _spec(max_runtime_seconds=0.5)
    _job, group, thread, result = _run_in_thread(session, spec, programs.block_until_killed)
    thread.join(60)
    assert result[0].status is JobStatus.STOPPED
    assert result[0].failure_reason == "max_runtime_seconds=0.5 reached"
    assert not any(pid_alive(pid) for pid in group.pids)


def test_a_verdict_slower_than_the_rest_of_the_job_still_lands_at_its_judged_step(
    session: Session,
) -> None:
    # The rounds after 9 take about 0.1 s: a verdict that took longer, as on a busy machine,
    # reached a job that had completed (a tuning job's decision hung on the machine's load).
    spec = _spec(instance_count=2, hyperparameters={"num_round": 243, "eval_metric": "logloss"})
    job = dataclasses.replace(session.controller.prepare(spec), judged_steps=frozenset({9}))
    stop = Stopper()
    verdict = "bracket 0 rung 9: 0.2 not in the best 1 of 3"

    def judge(report: Report) -> None:
        if report.step == 9:
            time.sleep(0.5)  # the tuner, slow to decide: the workers wait
            stop.request(JobStatus.STOPPED, verdict, early=True)

    record = session.controller.run(job, stop, on_report=judge)
    assert (record.status, record.failure_reason) == (JobStatus.STOPPED, verdict)
    steps = [point.step for point in session.store.metrics(job.id, "validation:logloss")]
    assert 9 <= max(steps) <= 10, steps


def test_bad_data_is_refused_before_anything_is_written(session: Session, tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("1,0.5\n2,0.1\n0,0.3\n")
    spec = _spec(channels={"train": {"path": str(tmp_path / "train.csv")}})
    with pytest.raises(InvalidInputError, match=r"row 2 has label 2.0, not 0 or 1"):
        session.controller.prepare(spec)
    assert session.store.list_training_jobs() == []


def test_too_few_rows_for_the_workers(session: Session, tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("1,0.5\n0,0.1\n")
    spec = _spec(channels={"train": {"path": str(tmp_path / "train.csv")}})
    with pytest.raises(InvalidInputError, match="2 rows, fewer than instance_count=3"):
        session.controller.prepare(spec)


def test_jobs_of_dead_controllers_are_marked_failed(session: Session) -> None:
    job = session.controller.prepare(_spec())
    gone = subprocess.Popen(["true"])
    gone.wait()
    session.store.mark_in_progress(
        job.id, 1.0, pid=gone.pid, host=__import__("socket").gethostname()
    )
    record = reconcile_orphan(session.store, session.store.get_training_job(job.id), 2.0)
    assert record.status is JobStatus.FAILED
    assert f"controller process {gone.pid} ended" in (record.failure_reason or "")


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_what_a_dead_controller_staged_is_removed_with_it(
    s3_endpoint: str,  # started before the test's leak check watches for listening sockets
    session: Session,
    tmp_path: Path,
    where: str,
    request: pytest.FixtureRequest,
) -> None:
    import fsspec

    staging = (
        str(tmp_path / "shared") if where == "folder" else request.getfixturevalue("s3_bucket")
    )
    job = session.controller.prepare(_spec(cluster={"staging": staging}))
    fs, root = fsspec.core.url_to_fs(staging)
    left = f"{root}/scaletune-{job.id}-1a2b3c4d"
    other = f"{root}/scaletune-another-job-1a2b3c4d/model.json"
    for key in (f"{left}/data/train/labels.npy", other):
        fs.makedirs(key.rsplit("/", 1)[0], exist_ok=True)
        fs.pipe(key, b"left behind")
    gone = subprocess.Popen(["true"])
    gone.wait()
    session.store.mark_in_progress(job.id, 1.0, pid=gone.pid, host=socket.gethostname())
    reconcile_orphan(session.store, session.store.get_training_job(job.id), 2.0)
    assert not fs.exists(left)
    assert fs.exists(other)
    fs.rm(other)


@pytest.mark.usefixtures("default_sigint")
def test_interrupt_stops_the_job_and_reraises(session: Session) -> None:
    session.controller.timing.stop_grace_seconds = 0.5  # this program never checks: killed after it
    job = session.controller.prepare(_spec())
    job = dataclasses.replace(job, algorithm=_ProgramOverride(programs.block_until_killed))
    pids: list[int] = []

    def interrupt_soon(group: Any) -> None:
        pids.extend(group.pids)
        signal.raise_signal(signal.SIGINT)  # as Ctrl-C does, in the controller's thread

    with pytest.raises(KeyboardInterrupt):
        session.controller.run(job, on_started=interrupt_soon)
    record = session.store.get_training_job(job.id)
    assert record.status is JobStatus.STOPPED
    assert record.failure_reason == "interrupted (Ctrl-C)"
    assert not any(pid_alive(pid) for pid in pids)


def test_a_model_that_cannot_be_published_fails_the_job(session: Session, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the output folder should go")
    record = session.controller.run(session.controller.prepare(_spec(output_path=str(blocker))))
    assert record.status is JobStatus.FAILED
    assert (record.failure_reason or "").startswith("could not publish the model:")
    assert record.artifact is None


def test_a_stopped_xgboost_job_ends_cleanly_with_its_model_and_warm_workers(
    session: Session, warm_backend: Any
) -> None:
    spec = _spec(hyperparameters={"num_round": 100_000, "eval_metric": "auc"})
    job, group, thread, result = _run_in_thread(session, spec)
    wait_until(lambda: len(session.store.metrics(job.id)) > 10)
    session.store.request_stop(job.id)
    thread.join(60)
    record = result[0]
    assert (record.status, record.failure_reason) == (JobStatus.STOPPED, "stop requested")
    model = Path(record.artifact or "") / "xgboost-model.json"
    assert model.exists()  # saved at the round where all workers agreed to stop
    assert set(group.pids) <= set(warm_backend.idle_pids)  # asked, not killed


@pytest.mark.parametrize(
    ("staging", "expected"),
    [
        (
            "s3://no-such-bucket-here/staging",
            r"cluster\.staging 's3://no-such-bucket-here/staging' cannot be written: ",
        ),
        (
            "nosuchprotocol://x/y",
            r"cluster\.staging 'nosuchprotocol://x/y' cannot be opened: Protocol not known",
        ),
        ("{blocker}/staging", r"cluster\.staging '.*a-file/staging' cannot be written: Not a"),
    ],
)
def test_a_staging_location_that_cannot_be_written_is_refused_before_the_job_is(
    s3_endpoint: str, session: Session, tmp_path: Path, staging: str, expected: str
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(InvalidInputError, match=expected) as caught:
        session.controller.prepare(_spec(cluster={"staging": staging.format(blocker=blocker)}))
    assert "\n" not in str(caught.value)
    assert session.store.list_training_jobs() == []
