"""Two Ray nodes on one machine (a head and a second `ray start` with a resource label of its
own): a job whose placement is SPREAD runs its workers on both."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaletune.api import Session
from scaletune.cluster import free_port
from scaletune.spec import training_spec_from_dict
from scaletune.store import JobStatus

pytest.importorskip("ray", reason="the Ray backend needs scaletune[ray]")

from scaletune.cluster import RayBackend

RAY = str(Path(sys.executable).with_name("ray"))


def _ray(*args: str) -> None:
    subprocess.run([RAY, *args], check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[str]:
    # A loopback-only test cluster: no token to share between the nodes and this driver.
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    port = free_port()
    address = f"127.0.0.1:{port}"
    try:
        _ray("start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false")
        _ray("start", f"--address={address}", "--num-cpus=2", '--resources={"second_node": 1}')
        yield address
    finally:
        # Every Ray process on this machine: by now no other module holds one (theirs end with
        # their module), and CI machines run nothing else of Ray.
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


def test_a_spread_job_places_its_workers_on_both_nodes(two_nodes: str, store_path: Path) -> None:
    import ray

    backend = RayBackend(address=two_nodes)
    try:
        nodes = [node for node in ray.nodes() if node["Alive"]]
        assert len(nodes) == 2
        assert any("second_node" in node["Resources"] for node in nodes)
        spec = training_spec_from_dict(
            {
                "algorithm": "xgboost",
                "instance_count": 2,
                "hyperparameters": {"num_round": 3},
                "channels": {"train": {"dataset": "breast-cancer"}},
                "cluster": {"backend": "ray", "placement": "SPREAD"},
            }
        )
        groups: list[Any] = []
        with Session(store_path, backend=backend) as session:
            record = session.controller.run(
                session.controller.prepare(spec), on_started=groups.append
            )
            assert record.status is JobStatus.COMPLETED, record.failure_reason
            assert len(set(groups[0].nodes)) == 2
    finally:
        backend.close()
        ray.shutdown()
