"""A Ray instance that scaletune starts by itself fits the job it starts for, as the local
backend would run it: more logical CPUs than cores where the job asks for more."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from scaletune.cluster._ray import _local_cpus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_logical_cpus_are_the_cores_unless_the_job_asks_for_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert _local_cpus(2.0) == (2, None)
    assert _local_cpus(0.0) == (2, None)
    cpus, notice = _local_cpus(2.5)
    assert cpus == 3
    assert notice is not None and "3 logical CPUs on this machine's 2 cores" in notice


def test_a_ray_instance_started_here_runs_a_job_of_more_workers_than_cores(
    store_path: Path,
) -> None:
    pytest.importorskip("ray", reason="the Ray backend needs scaletune[ray]")
    cores = os.cpu_count() or 1
    if cores > 3:
        pytest.skip(f"{cores} cores: a job of more workers than cores would be too big here")
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # Ray keeps its session's logs in $TMPDIR/ray, and its sockets' paths must stay short.
    ray_temp = tempfile.mkdtemp(prefix="st-ray-", dir="/tmp")
    environment["TMPDIR"] = ray_temp
    try:
        result = _train_on_ray(cores + 1, environment)
    finally:
        shutil.rmtree(ray_temp, ignore_errors=True)
    assert result.returncode == 0, result.stderr[-2000:]
    job = json.loads(result.stdout)
    assert (job["status"], job["instance_count"]) == ("Completed", cores + 1)
    assert f"Ray: started with {cores + 1} logical CPUs on this machine's {cores} cores" in (
        result.stderr
    )


def _train_on_ray(workers: int, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "scaletune",
            "train",
            str(EXAMPLES / "xgboost-csv.toml"),
            "--backend",
            "ray",
            "--set",
            f"instance_count={workers}",
            "--json",
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_logs_of_dead_workers_are_removed_by_the_next_actor_and_live_ones_kept(
    tmp_path: Path,
) -> None:
    from scaletune.cluster._ray import LOG_PREFIX, remove_stale_logs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{LOG_PREFIX}{dead.pid}-abc.log"
    live = tmp_path / f"{LOG_PREFIX}{os.getpid()}-def.log"
    other = tmp_path / "someone-else.log"
    for path in (stale, live, other):
        path.write_text("line\n")
    remove_stale_logs(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])
