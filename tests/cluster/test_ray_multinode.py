"""Two Ray nodes on one machine (a head and a second `ray start` with a resource label of its
own): a job whose placement is SPREAD runs its workers on both. The controller is a process
of its own, as it would be against a real cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaletune.cluster import free_port

pytest.importorskip("ray", reason="the Ray backend needs scaletune[ray]")

RAY = str(Path(sys.executable).with_name("ray"))
# A loopback-only test cluster: no token to share between the nodes and the controller.
ENVIRONMENT = {**os.environ, "RAY_AUTH_MODE": "disabled"}

CONTROLLER = textwrap.dedent(
    """
    import json, sys
    import ray
    from scaletune.api import Session
    from scaletune.cluster import RayBackend
    from scaletune.spec import training_spec_from_dict

    address, store = sys.argv[1], sys.argv[2]
    spec = training_spec_from_dict({
        "algorithm": "xgboost",
        "instance_count": 2,
        "hyperparameters": {"num_round": 3},
        "channels": {"train": {"dataset": "breast-cancer"}},
        "cluster": {"backend": "ray", "placement": "SPREAD"},
    })
    groups = []
    with RayBackend(address=address) as backend, Session(store, backend=backend) as session:
        nodes = [n for n in ray.nodes() if n["Alive"]]
        record = session.controller.run(session.controller.prepare(spec), on_started=groups.append)
        print(json.dumps({
            "nodes": len(nodes),
            "labelled": sum("second_node" in n["Resources"] for n in nodes),
            "status": record.status.value,
            "reason": record.failure_reason,
            "worker_nodes": groups[0].nodes,
        }))
    """
)


def _ray(*args: str) -> None:
    subprocess.run([RAY, *args], check=True, capture_output=True, timeout=120, env=ENVIRONMENT)


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[str]:
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


def test_a_spread_job_places_its_workers_on_both_nodes(two_nodes: str, store_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CONTROLLER, two_nodes, str(store_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENVIRONMENT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["nodes"], result["labelled"]) == (2, 1)
    assert result["status"] == "Completed", result["reason"]
    assert len(set(result["worker_nodes"])) == 2
