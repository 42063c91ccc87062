"""Starting workers: forked from a fork server that did the imports, or fresh interpreters."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from scaletune.cluster import LocalBackend
from scaletune.cluster._starters import ForkServer, FreshInterpreters, default_starter
from scaletune.worker import Exited, Finished, Report
from tests.cluster import programs
from tests.cluster.test_local_backend import _collect, _tasks
from tests.conftest import pid_alive, wait_until


def _reports(backend: LocalBackend, tmp_path: Path, workers: int) -> list[Report]:
    group = backend.launch(_tasks(programs.report_parent_and_imports, workers, tmp_path))
    events = _collect(group, Finished, workers)
    group.release()
    return [event for event in events if isinstance(event, Report)]


def test_workers_are_forked_from_one_server_that_did_the_imports(tmp_path: Path) -> None:
    with LocalBackend(warm_pool=False, preload=("colorsys",), starter=ForkServer()) as backend:
        first = _reports(backend, tmp_path, 2)
        (server,) = backend.server_pids
        second = _reports(backend, tmp_path, 2)
        assert backend.server_pids == [server]  # one server for every launch
        for report in first + second:
            assert report.metrics == {"parent": float(server), "preloaded": 1.0}
    wait_until(lambda: not pid_alive(server), timeout=10)  # closed with its backend


def test_the_fork_server_imports_a_jobs_program_once_for_every_later_worker(
    tmp_path: Path,
) -> None:
    with LocalBackend(warm_pool=False, preload=(), starter=ForkServer()) as backend:
        for _ in range(2):  # the first job's workers as the next job's
            group = backend.launch(
                _tasks(programs.report_where_programs_were_imported, 2, tmp_path)
            )
            events = _collect(group, Finished, 2)
            group.release()
            reports = [event.metrics for event in events if isinstance(event, Report)]
            assert reports == [{"imported_by_parent": 1.0}]  # rank 0 reports


def test_the_fork_server_imports_the_jobs_library_and_no_other(tmp_path: Path) -> None:
    # Every algorithm's (xgboost, pandas, torch) would cost seconds of CPU in each command's
    # fork server; a job's program module imports its own.
    with LocalBackend(warm_pool=False, starter=ForkServer()) as backend:
        backend.warm_up([programs.report_heavy_imports])
        group = backend.launch(_tasks(programs.report_heavy_imports, 1, tmp_path))
        (report,) = [e for e in _collect(group, Finished, 1) if isinstance(e, Report)]
        group.release()
    assert report.metrics == {"xgboost": 0.0, "pandas": 0.0, "torch": 0.0}


def test_a_killed_fork_server_is_started_again_and_its_workers_leave(tmp_path: Path) -> None:
    with LocalBackend(preload=(), starter=ForkServer()) as backend:
        group = backend.launch(_tasks(programs.block_until_killed, 2, tmp_path))
        _collect(group, Report, 1)
        (server,) = backend.server_pids
        subprocess.run(["kill", "-KILL", str(server)], check=True)
        # its workers watch it: they end, and are reported as exited
        exited = [e for e in _collect(group, Exited, 2) if isinstance(e, Exited)]
        assert sorted(e.rank for e in exited) == [0, 1]
        assert all(not pid_alive(pid) for pid in group.pids)
        group.kill()
        reports = _reports(backend, tmp_path, 2)  # the next job gets a new server
        (again,) = backend.server_pids
        assert again != server
        assert {r.metrics["parent"] for r in reports} == {float(again)}


def test_a_forked_worker_killed_by_a_signal_exits_with_it(tmp_path: Path) -> None:
    with LocalBackend(warm_pool=False, preload=(), starter=ForkServer()) as backend:
        group = backend.launch(_tasks(programs.block_until_killed, 1, tmp_path))
        _collect(group, Report, 1)
        # (SIGTERM to a busy worker is a preemption notice, not an end: test_local_backend)
        subprocess.run(["kill", "-KILL", str(group.pids[0])], check=True)
        exited = next(e for e in _collect(group, Exited, 1) if isinstance(e, Exited))
        assert exited.exitcode == -signal.SIGKILL
        group.kill()


def test_fresh_interpreters_start_workers_of_their_own(tmp_path: Path) -> None:
    with LocalBackend(warm_pool=False, preload=(), starter=FreshInterpreters()) as backend:
        reports = _reports(backend, tmp_path, 2)
        assert backend.server_pids == []
    assert {r.metrics["parent"] for r in reports} == {float(os.getpid())}  # this process


@pytest.mark.parametrize(("setting", "kind"), [("0", FreshInterpreters), ("1", ForkServer)])
def test_the_fork_server_is_the_default_unless_turned_off(
    monkeypatch: pytest.MonkeyPatch, setting: str, kind: type
) -> None:
    monkeypatch.setenv("SCALETUNE_FORK_SERVER", setting)
    assert isinstance(default_starter(), kind)


def test_the_fork_server_starts_when_warmed_up_not_with_its_backend(tmp_path: Path) -> None:
    """A job being prepared warms its backend up: the imports overlap its data's loading. A
    backend opened and left unused starts nothing."""
    with LocalBackend(preload=(), starter=ForkServer()) as backend:
        assert backend.server_pids == []
        backend.warm_up()
        backend.warm_up()  # one server, however often
        (server,) = backend.server_pids
        assert pid_alive(server)
        reports = _reports(backend, tmp_path, 1)
        assert reports[0].metrics["parent"] == float(server)
    wait_until(lambda: not pid_alive(server), timeout=10)
