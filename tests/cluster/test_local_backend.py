from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from pydantic import BaseModel

from scaletune.cluster import LocalBackend, WorkerGroup
from scaletune.errors import InvalidInputError
from scaletune.worker import (
    Exited,
    Failed,
    Finished,
    Notice,
    Rendezvous,
    Report,
    WorkerContext,
    WorkerEvent,
    WorkerProgram,
    WorkerTask,
)
from tests.cluster import programs
from tests.conftest import pid_alive, pooled, wait_until


@pytest.fixture(scope="module")
def warm_backend() -> Iterator[LocalBackend]:
    """A pool of this module's own: its tests assert which workers it holds idle."""
    with pooled(LocalBackend(max_idle_workers=4)) as backend:
        yield backend


class _NoHyperparameters(BaseModel):
    pass


def _tasks(program: WorkerProgram, world_size: int, logs: Path) -> list[WorkerTask]:
    return [
        WorkerTask(
            job_id="test",
            rank=rank,
            world_size=world_size,
            program=program,
            hyperparameters=_NoHyperparameters(),
            channels={},
            model_dir=logs,
            log_path=logs / f"worker-{rank}.log",
            rendezvous=Rendezvous("127.0.0.1", 0),
            seed=0,
        )
        for rank in range(world_size)
    ]


def _collect(group: WorkerGroup, until: type, count: int, timeout: float = 60) -> list[WorkerEvent]:
    events: list[WorkerEvent] = []
    deadline = time.monotonic() + timeout
    while sum(isinstance(e, until) for e in events) < count:
        assert time.monotonic() < deadline, f"no {count} {until.__name__} events: {events}"
        events.extend(group.poll(0.1))
    return events


def test_workers_report_finish_and_are_reused(warm_backend: LocalBackend, tmp_path: Path) -> None:
    group = warm_backend.launch(_tasks(programs.report_three_steps, 3, tmp_path))
    first_pids = group.pids
    events = _collect(group, Finished, 3)
    reports = [e for e in events if isinstance(e, Report)]
    assert [(r.rank, r.step) for r in reports] == [(0, 1), (0, 2), (0, 3)]  # rank 0 only
    assert reports[0].metrics == {"loss": 1.0, "rank": 0.0}
    group.release()
    assert sorted(warm_backend.idle_pids) == sorted(first_pids)

    again = warm_backend.launch(_tasks(programs.report_three_steps, 3, tmp_path))
    assert sorted(again.pids) == sorted(first_pids)  # warm: no new processes
    _collect(again, Finished, 3)
    again.release()
    log = (tmp_path / "worker-2.log").read_text()
    assert "hello from rank 2 of 3" in log
    assert "native stderr line" in log


def test_a_raising_worker_fails_with_its_error_and_traceback(tmp_path: Path) -> None:
    with LocalBackend(warm_pool=False, preload=()) as backend:
        group = backend.launch(_tasks(programs.raise_on_rank_one, 3, tmp_path))
        failed = next(e for e in _collect(group, Failed, 1) if isinstance(e, Failed))
        assert failed.rank == 1
        assert failed.error == "ValueError: bad shard on rank 1"
        assert "raise_on_rank_one" in failed.traceback
        pids = group.pids
        group.kill()
        assert not any(pid_alive(pid) for pid in pids)
    assert "ValueError: bad shard on rank 1" in (tmp_path / "worker-1.log").read_text()


def test_a_killed_worker_is_reported_as_exited(tmp_path: Path) -> None:
    with LocalBackend(warm_pool=False, preload=()) as backend:
        group = backend.launch(_tasks(programs.block_until_killed, 2, tmp_path))
        _collect(group, Report, 1)
        victim = group.pids[1]
        subprocess.run(["kill", "-KILL", str(victim)], check=True)
        exited = next(e for e in _collect(group, Exited, 1) if isinstance(e, Exited))
        assert (exited.rank, exited.exitcode) == (1, -9)
        group.kill()


def test_a_worker_exiting_is_reported_with_its_code(tmp_path: Path) -> None:
    with LocalBackend(warm_pool=False, preload=()) as backend:
        group = backend.launch(_tasks(programs.exit_hard, 1, tmp_path))
        exited = next(e for e in _collect(group, Exited, 1) if isinstance(e, Exited))
        assert exited.exitcode == 3
        group.kill()


def test_workers_ignoring_sigterm_are_killed(tmp_path: Path) -> None:
    with LocalBackend(warm_pool=False, preload=()) as backend:
        group = backend.launch(_tasks(programs.ignore_sigterm_and_block, 2, tmp_path))
        _collect(group, Report, 1)
        pids = group.pids
        group.kill()
        assert not any(pid_alive(pid) for pid in pids)


def test_workers_leave_when_their_controller_dies(tmp_path: Path) -> None:
    controller = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = {sys.path!r}
        from scaletune.cluster import LocalBackend
        backend = LocalBackend(preload=())
        group = backend.launch([])  # nothing to run; idle workers instead
        backend.prestart(2)
        print(*backend.idle_pids, *backend.server_pids, flush=True)
        os._exit(0)  # no cleanup at all, as after kill -9
    """)
    done = subprocess.run(
        [sys.executable, "-c", controller], capture_output=True, text=True, check=True, timeout=120
    )
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 3  # two workers and the fork server they were forked from
    wait_until(lambda: not any(pid_alive(pid) for pid in pids), timeout=10)


def test_closed_backends_refuse_work(tmp_path: Path) -> None:
    backend = LocalBackend()
    backend.close()
    with pytest.raises(Exception, match="closed"):
        backend.launch(_tasks(programs.report_three_steps, 1, tmp_path))


def test_a_task_that_cannot_be_loaded_fails_without_killing_the_worker(
    warm_backend: LocalBackend, tmp_path: Path
) -> None:
    task = dataclasses.replace(
        _tasks(programs.report_three_steps, 1, tmp_path)[0],
        hyperparameters=programs.Unpicklable(),  # type: ignore[arg-type]
    )
    group = warm_backend.launch([task])
    failed = next(e for e in _collect(group, Failed, 1) if isinstance(e, Failed))
    assert "cannot load the task: ModuleNotFoundError" in failed.error
    assert all(pid_alive(pid) for pid in group.pids)  # the worker lives on for the next job
    group.release()


def test_programs_in_main_are_refused(tmp_path: Path) -> None:
    def in_main(ctx: WorkerContext) -> None:
        pass

    in_main.__module__ = "__main__"
    with LocalBackend(preload=()) as backend, pytest.raises(InvalidInputError, match="__main__"):
        backend.launch(_tasks(in_main, 1, tmp_path))


def test_a_group_released_while_busy_is_killed_not_pooled(
    warm_backend: LocalBackend, tmp_path: Path
) -> None:
    group = warm_backend.launch(_tasks(programs.block_until_killed, 2, tmp_path))
    _collect(group, Report, 1)
    pids = group.pids
    group.release()  # e.g. a tuning trial stopped early: its workers are mid-task
    assert not any(pid_alive(pid) for pid in pids)
    assert not set(pids) & set(warm_backend.idle_pids)


def test_prestart_fills_the_pool_for_the_next_jobs(tmp_path: Path) -> None:
    with LocalBackend(preload=(), max_idle_workers=1) as backend:
        backend.prestart(3)
        assert backend.max_idle_workers == 3
        warm = set(backend.idle_pids)
        assert len(warm) == 3
        group = backend.launch(_tasks(programs.report_three_steps, 3, tmp_path))
        assert set(group.pids) == warm
        _collect(group, Finished, 3)
        group.release()


def test_sigterm_to_a_busy_worker_is_a_notice_and_it_leaves_once_its_task_ends(
    warm_backend: LocalBackend, tmp_path: Path
) -> None:
    tasks = [
        dataclasses.replace(task, stop_file=tmp_path / "stop")
        for task in _tasks(programs.report_until_stopped, 2, tmp_path)
    ]
    group = warm_backend.launch(tasks)
    _collect(group, Report, 1)
    staying, leaving = group.pids
    os.kill(leaving, signal.SIGTERM)  # what a spot VM's preemption or a pod's shutdown sends
    notice = next(e for e in _collect(group, Notice, 1) if isinstance(e, Notice))
    assert (notice.rank, notice.source) == (1, "SIGTERM")
    _collect(group, Report, 3)  # it trains on: the job decides when to stop and checkpoint
    assert pid_alive(leaving)
    group.request_stop()
    _collect(group, Finished, 2)
    wait_until(lambda: not pid_alive(leaving), timeout=10)  # it leaves once its task ends
    assert group.poll(0.1) == []  # a worker that finished, then left, is no failure
    group.release()
    assert warm_backend.idle_pids == [staying]  # its machine is going: never handed a task


def test_a_worker_started_earlier_runs_each_task_in_the_environment_of_its_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fork server and its first worker start with ST_REMOVED and without ST_GIVEN; the
    # user changes both before the job (as object storage's credentials are set, say).
    monkeypatch.setenv("ST_REMOVED", "1")
    monkeypatch.delenv("ST_GIVEN", raising=False)
    with LocalBackend(preload=()) as backend:
        backend.prestart(1)
        (idle,) = backend.idle_pids
        for given in ("7", "8"):  # the same warm worker, a job after another
            monkeypatch.setenv("ST_GIVEN", given)
            monkeypatch.delenv("ST_REMOVED", raising=False)
            group = backend.launch(_tasks(programs.report_environment, 1, tmp_path))
            assert group.pids == [idle]
            (report,) = [e for e in _collect(group, Finished, 1) if isinstance(e, Report)]
            assert report.metrics == {
                "given": float(given),
                "removed": 0.0,
                "given_to_scripts": float(given),
                "removed_for_scripts": 0.0,
            }
            group.release()
            monkeypatch.setenv("ST_REMOVED", "1")


def test_sigterm_to_an_idle_worker_ends_it(tmp_path: Path) -> None:
    with LocalBackend(preload=()) as backend:
        backend.prestart(1)
        (idle,) = backend.idle_pids
        born = psutil.Process(idle).create_time()
        os.kill(idle, signal.SIGTERM)
        # Reaped by its fork server: every thread has ended, and its connection with them. (A
        # zombie status is not enough: its main thread shows it while another thread still
        # ends, the connection open; a launch then got the dying worker, 1 run in many on a
        # busy machine.)
        wait_until(lambda: not psutil.pid_exists(idle), timeout=10)
        group = backend.launch(_tasks(programs.report_three_steps, 1, tmp_path))
        # A process started for it, not the one that died (told by its pid and start time).
        # The fork server may not have told of the death yet: the backend sees it on the
        # worker's connection, closed as the process ended.
        (worker,) = group.pids
        assert (worker, psutil.Process(worker).create_time()) != (idle, born)
        _collect(group, Finished, 1)
        group.release()
