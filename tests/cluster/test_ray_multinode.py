"""Two Ray nodes on one machine (a head and a second `ray start` with a resource label of its
own): a job whose placement is SPREAD runs its workers on both. The controller is a process
of its own, as it would be against a real cluster, and the job's data, model and output pass
as they would between machines: through object storage (a local S3) and Ray."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import psutil
import pytest

from scaletune.cluster import free_port

pytest.importorskip("ray", reason="the Ray backend needs scaletune[ray]")
# Two Ray nodes, their workers and a controller process, with node losses noticed in 3 s:
# the whole machine, alone (`make unit` runs serial tests before the parallel ones).
pytestmark = pytest.mark.serial

RAY = str(Path(sys.executable).with_name("ray"))


def _environment() -> dict[str, str]:
    """A loopback-only test cluster: no token to share between the nodes and the controller.
    The local S3's address, set by then, reaches the nodes' workers."""
    return {**os.environ, "RAY_AUTH_MODE": "disabled"}


CONTROLLER = textwrap.dedent(
    """
    import json, sys
    import ray
    from scaletune.api import Session
    from scaletune.cluster import RayBackend
    from scaletune.spec import training_spec_from_dict
    from scaletune.training import BatchPredictor, read_input

    address, store, bucket = sys.argv[1], sys.argv[2], sys.argv[3]
    spec = training_spec_from_dict({
        "algorithm": "xgboost",
        "instance_count": 2,
        "hyperparameters": {"num_round": 3},
        "channels": {"train": {"path": f"{bucket}/data/"}},
        "cluster": {
            "backend": "ray", "placement": "SPREAD", "staging": f"{bucket}/staging",
        },
    })
    groups = []
    with RayBackend(address=address) as backend, Session(store, backend=backend) as session:
        nodes = [n for n in ray.nodes() if n["Alive"]]
        record = session.controller.run(session.controller.prepare(spec), on_started=groups.append)
        worker_nodes = groups[0].nodes  # asked while its actors live (prediction ends them)
        # Batch prediction on 3 workers, more than one node's 2 CPUs hold: the rows, the model
        # and the parts pass through the job's staging in the bucket, as its training data did.
        rows = read_input(f"{bucket}/data/")
        predictor = BatchPredictor(session.store, backend)
        here = predictor.predict(record.id, rows)
        spread = predictor.predict(record.id, rows, instance_count=3)
        write_result({
            "predicted": [here.values.tolist(), spread.values.tolist()],
            "nodes": len(nodes),
            "labelled": sum("second_node" in n["Resources"] for n in nodes),
            "status": record.status.value,
            "reason": record.failure_reason,
            "artifact": record.artifact,
            "log_dir": record.log_dir,
            "worker_nodes": worker_nodes,
            "locations": list(session.store.attempts.of(record.id)[-1].workers),
        })
    """
)


def _ray(*args: str, **environment: str) -> None:
    subprocess.run(
        [RAY, *args],
        check=True,
        capture_output=True,
        timeout=120,
        env={**_environment(), **environment},
    )


@pytest.fixture(scope="module")
def two_nodes(s3_endpoint: str) -> Iterator[str]:
    port = free_port()
    address = f"127.0.0.1:{port}"
    # A temp folder of this cluster's own (short: Ray's socket paths must fit 107 bytes), which
    # every one of its daemons names on its command line: how they are told from other Rays.
    folder = tempfile.mkdtemp(prefix="st-ray-", dir="/tmp")
    try:
        _ray(
            "start",
            "--head",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            f"--temp-dir={folder}",
            # A node lost is noticed in about 3 s rather than Ray's 15 (3 checks missed, 1 s
            # apart): the node-loss tests wait for it.
            RAY_health_check_period_ms="1000",
            RAY_health_check_failure_threshold="3",
        )
        _ray("start", f"--address={address}", "--num-cpus=2", '--resources={"second_node": 1}')
        yield address
    finally:
        _stop_cluster(folder, port)  # `ray stop` would end every Ray on this machine
        shutil.rmtree(folder, ignore_errors=True)


# What a controller script found, as JSON in a file of the test's own: Ray's driver prints to
# stdout too (messages the cluster pushes to it, under load), so stdout is no channel for it.
RESULT = textwrap.dedent(
    """
    import json as _json, os as _os

    def write_result(value):
        with open(_os.environ["SCALETUNE_TEST_RESULT"], "w") as result:
            _json.dump(value, result)
    """
)


def _controller(
    script: str, address: str, store_path: Path, bucket: str, *more: str
) -> dict[str, Any]:
    """Run a controller script in a process of its own; the result it wrote."""
    result_file = store_path.parent / "controller-result.json"
    result_file.parent.mkdir(parents=True, exist_ok=True)
    result_file.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", RESULT + script, address, str(store_path), bucket, *more],
        capture_output=True,
        text=True,
        timeout=400,
        env={**_environment(), "SCALETUNE_TEST_RESULT": str(result_file)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(result_file.read_text())
    return result


def _stop_cluster(folder: str, port: int) -> None:
    """End this cluster's daemons and everything they started (workers and agents rename
    themselves, so they are found as children), and only them. Each daemon names the
    cluster's temp folder on its command line, but for the Ray client's server, which names
    the head's address (it outlived the tests before)."""
    head = f":{port}"
    ours: dict[int, psutil.Process] = {}
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(
                folder in part or (part.startswith("--address=") and part.endswith(head))
                for part in process.info["cmdline"] or ()
            ):
                for member in (process, *process.children(recursive=True)):
                    ours[member.pid] = member
    for process in ours.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    # A daemon still up 3 s after SIGTERM is killed: a test cluster keeps nothing worth more.
    _, alive = psutil.wait_procs(list(ours.values()), timeout=3)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=10)


def test_a_spread_job_runs_on_both_nodes_with_its_data_in_object_storage(
    two_nodes: str, store_path: Path, s3_bucket: str
) -> None:
    rows = [f"{i % 2},{(i % 2) + 0.1 * (i % 7)},{i % 5}" for i in range(80)]
    for part in (0, 1):  # a prefix of two files, read as one channel
        with fsspec.open(f"{s3_bucket}/data/part-{part}.csv", "w") as handle:
            handle.write("\n".join(rows[part::2]) + "\n")
    result = _controller(CONTROLLER, two_nodes, store_path, s3_bucket)
    assert (result["nodes"], result["labelled"]) == (2, 1)
    assert result["status"] == "Completed", result["reason"]
    assert len(set(result["worker_nodes"])) == 2
    # Where each rank ran, as the store recorded it: the node's address and id.
    assert [location.split(" node ")[1] for location in result["locations"]] == [
        node[:8] for node in result["worker_nodes"]
    ]
    assert not any(location.startswith("unknown") for location in result["locations"])
    assert (Path(result["artifact"]) / "xgboost-model.json").exists()  # rank 0 uploaded it
    for rank in (0, 1):  # written on each node, streamed back through its actor
        log = (Path(result["log_dir"]) / f"worker-{rank}.log").read_text()
        assert f"rank {rank} of 2, on " in log
    here, spread = result["predicted"]
    assert len(here) == 80 and spread == here  # every row, in order, as scored here
    assert fsspec.filesystem("s3").find(f"{s3_bucket}/staging") == []


def kill_node(label: str) -> int:
    """End the node whose raylet carries `label` and all it started (its workers among them),
    as a machine that loses power takes them: nothing is told, nothing ends cleanly. Processes
    come and go as this runs (Ray starts and ends workers): one that is gone by the time it
    is looked at or killed is skipped, not a reason to stop killing."""
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or ())
        if "raylet" in (process.info["name"] or "") and label in cmdline:
            doomed = [process]
            with contextlib.suppress(psutil.Error):
                doomed += process.children(recursive=True)
            for member in doomed:
                with contextlib.suppress(psutil.Error):
                    member.kill()
            return len(doomed)
    raise AssertionError(f"no raylet of a node labelled {label}")


# The controller scripts kill nodes with the same function.
KILL_NODE = "import contextlib\nimport psutil\n\n" + inspect.getsource(kill_node)


NODE_LOSS = KILL_NODE + textwrap.dedent(
    """
    import contextlib, json, sys, threading, time
    import psutil, ray
    from scaletune.api import Session
    from scaletune.cluster import RayBackend
    from scaletune.spec import training_spec_from_dict

    address, store, bucket = sys.argv[1], sys.argv[2], sys.argv[3]
    data = {"dataset": "breast-cancer"}
    spec = training_spec_from_dict({
        "algorithm": "xgboost",
        "instance_count": 3,
        # The node goes at round 45 or a little after, and the job cannot end without its
        # worker: 400 rounds leave room for the kill's lag on a loaded machine.
        "hyperparameters": {"num_round": 400, "max_depth": 2, "eval_metric": "auc"},
        "channels": {"train": data, "validation": data},
        "cluster": {"backend": "ray", "placement": "SPREAD", "staging": f"{bucket}/staging"},
        "checkpoint": {"every_steps": 20, "every_seconds": None},
        "retry": {"heartbeat_timeout_seconds": 10},
    })


    groups, killed, errors = [], [], []
    with RayBackend(address=address) as backend, Session(store, backend=backend) as session:
        # A node that has joined may not yet count in the scheduler's view of free resources,
        # and SPREAD is best effort: wait until its CPU does, or the job might skip it.
        deadline = time.monotonic() + 60
        while ray.available_resources().get("CPU", 0) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        doomed = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "doomed" in n["Resources"]]

        def on_started(group):
            groups.append(group.nodes)
            if len(groups) > 1:
                return
            job_id = session.store.list_training_jobs()[0].id

            def kill_after_two_checkpoints():
                try:
                    while True:
                        steps = session.store.metrics(job_id, "validation:auc")
                        if steps and steps[-1].step >= 45:
                            killed.append(kill_node("doomed"))
                            return
                        time.sleep(0.05)
                except Exception as error:  # reported in the output, not lost with the thread
                    errors.append(repr(error))

            threading.Thread(target=kill_after_two_checkpoints, daemon=True).start()

        record = session.controller.run(session.controller.prepare(spec), on_started=on_started)
        attempts = session.store.attempts.of(record.id)
        write_result({
            "doomed": doomed,
            "groups": groups,
            "killed": killed,
            "errors": errors,
            "status": record.status.value,
            "reason": record.failure_reason,
            "attempts": [
                {"reason": a.reason, "retried": a.retried, "resumed": a.resumed_from_step,
                 "checkpoint": a.checkpoint_step, "redone": a.steps_redone}
                for a in attempts
            ],
            "steps": [p.step for p in session.store.metrics(record.id, "validation:auc")],
        })
    """
)


def test_a_node_lost_mid_job_is_retried_from_its_checkpoint_on_the_nodes_left(
    two_nodes: str, store_path: Path, s3_bucket: str
) -> None:
    # A third node for this test alone (the job's SPREAD placement puts a worker on each), with
    # a temp folder of its own: the disk of a machine that will be lost.
    disk = tempfile.mkdtemp(prefix="st-doomed-", dir="/tmp")
    try:
        _ray(
            "start",
            f"--address={two_nodes}",
            "--num-cpus=1",
            '--resources={"doomed": 1}',
            TMPDIR=disk,
        )
        result = _controller(NODE_LOSS, two_nodes, store_path, s3_bucket)
        left_on_the_lost_disk = [path.name for path in Path(disk).iterdir()]
    finally:
        shutil.rmtree(disk, ignore_errors=True)
    (doomed,) = result["doomed"]
    # What pytest would cut short in a failure's message: the job's end first.
    outcome = (result["status"], result["reason"], result["attempts"], result["errors"])
    # Its raylet and its worker at least.
    assert result["killed"] and result["killed"][0] >= 2, outcome
    assert len(result["groups"]) == 2, outcome  # a second placement, after the node was lost
    first_group, second_group = result["groups"]
    assert doomed in first_group  # a worker was on the node that was lost
    assert doomed not in second_group  # the retry ran on the nodes left
    assert result["status"] == "Completed", (result["reason"], result["attempts"])
    first, second = result["attempts"]
    assert first["retried"] and first["checkpoint"] is not None and first["checkpoint"] >= 40
    assert second["resumed"] == first["checkpoint"]  # from the checkpoint in object storage
    # Rounds past the checkpoint (none if the node went just after it); reports in flight.
    assert 0 <= second["redone"] <= 20 + 5
    # Only what a lost machine keeps on its own disk: its worker's log.
    assert all(name.startswith("scaletune-ray-worker-") for name in left_on_the_lost_disk)
    assert result["steps"] == list(range(1, 401))  # each round once


ELASTIC_NODES = KILL_NODE + textwrap.dedent(
    """
    import json, os, subprocess, sys, threading, time
    import ray
    from scaletune.api import Session
    from scaletune.cluster import RayBackend
    from scaletune.spec import training_spec_from_dict
    from scaletune.store import resizes

    address, store, bucket, ray_cli, added_disk = sys.argv[1:6]
    data = {"dataset": "breast-cancer"}
    spec = training_spec_from_dict({
        "algorithm": "xgboost",
        "instance_count": {"min": 2, "max": 5},
        # The node joins as the 4 workers start (in 6-20 s, both at the machine's pace): they
        # grew at round 41-61 on 2 cores, a CPU hog beside them or not. The rounds after
        # only have to outlast that.
        "hyperparameters": {"num_round": 800, "max_depth": 2, "eval_metric": "auc"},
        "channels": {"train": data, "validation": data},
        "cluster": {"backend": "ray", "staging": f"{bucket}/staging"},
        "checkpoint": {"every_steps": 20, "every_seconds": None},
        "retry": {"heartbeat_timeout_seconds": 10},
    })
    placed, killed, added, errors = [], [], [], []

    def add_node():
        # A machine joins: one more CPU, labelled so the test can end it afterwards.
        subprocess.run(
            [ray_cli, "start", f"--address={address}", "--num-cpus=1",
             '--resources={"added_elastic": 1}'],
            check=True, capture_output=True, timeout=120,
            env={**os.environ, "TMPDIR": added_disk},
        )
        added.append(time.monotonic())

    with RayBackend(address=address) as backend, Session(store, backend=backend) as session:
        deadline = time.monotonic() + 60  # the labelled node's CPU counted as free
        while ray.available_resources().get("CPU", 0) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        def ids(label):
            return [n["NodeID"] for n in ray.nodes() if n["Alive"] and label in n["Resources"]]

        doomed = ids("doomed_elastic")

        def in_background(action):
            def run():
                try:
                    action()
                except Exception as error:  # reported in the output, not lost with the thread
                    errors.append(repr(error))

            threading.Thread(target=run, daemon=True).start()

        def on_started(group):
            placed.append((time.monotonic(), group.nodes))
            if len(placed) == 2:  # going on without the lost node: capacity comes back
                in_background(add_node)
            if len(placed) > 1:
                return
            job_id = session.store.list_training_jobs()[0].id

            def kill_after_two_checkpoints():
                while True:
                    steps = session.store.metrics(job_id, "validation:auc")
                    if steps and steps[-1].step >= 45:
                        killed.append((time.monotonic(), kill_node("doomed_elastic")))
                        return
                    time.sleep(0.05)

            in_background(kill_after_two_checkpoints)

        record = session.controller.run(session.controller.prepare(spec), on_started=on_started)
        attempts = session.store.attempts.of(record.id)
        write_result({
            "doomed": doomed,
            "added": ids("added_elastic"),
            "groups": [nodes for _, nodes in placed],
            "back_after_kill": placed[1][0] - killed[0][0] if killed and len(placed) > 1 else None,
            "grown_after_join": placed[2][0] - added[0] if added and len(placed) > 2 else None,
            "errors": errors,
            "status": record.status.value,
            "reason": record.failure_reason,
            "sizes": [a.size for a in attempts],
            "resizes": [(c.from_size, c.to_size, c.reason) for c in resizes(attempts)],
            "resumed": [a.resumed_from_step for a in attempts],
            "billable": record.billable_seconds,
            "wall": record.wall_seconds,
            "steps": [p.step for p in session.store.metrics(record.id, "validation:auc")],
        })
    """
)


def test_an_elastic_job_goes_on_without_a_lost_node_and_grows_onto_one_that_joins(
    two_nodes: str, store_path: Path, s3_bucket: str
) -> None:
    # 5 CPUs: the head's 2, the second node's 2 and a doomed node's 1; the job (2 to 5
    # workers) starts with 5, loses the doomed node, goes on with 4 at once, then grows to 5
    # when another node joins.
    disks = [tempfile.mkdtemp(prefix=f"st-{name}-", dir="/tmp") for name in ("doomed", "added")]
    try:
        _ray(
            "start",
            f"--address={two_nodes}",
            "--num-cpus=1",
            '--resources={"doomed_elastic": 1}',
            TMPDIR=disks[0],
        )
        result = _controller(ELASTIC_NODES, two_nodes, store_path, s3_bucket, RAY, disks[1])
    finally:
        with contextlib.suppress(AssertionError):  # the node that joined, if it did
            kill_node("added_elastic")
        for disk in disks:
            shutil.rmtree(disk, ignore_errors=True)
    outcome = (result["status"], result["reason"], result["resizes"], result["errors"])
    print("the job's end:", result["status"], result["reason"])  # whole, where pytest cuts it
    assert result["status"] == "Completed", outcome
    assert result["sizes"] == [5, 4, 5], outcome
    (doomed,), (added,) = result["doomed"], result["added"]
    first, smaller, grown = result["groups"]
    assert doomed in first and doomed not in smaller and added in grown
    (lost, back) = result["resizes"]
    assert lost[:2] == [5, 4] and "exited unexpectedly (Ray:" in lost[2], outcome
    assert back == [4, 5, "resized to 5 workers: room for more"]
    assert all(step is not None for step in result["resumed"][1:])  # each from a checkpoint
    assert result["steps"] == list(range(1, 801))  # each round once
    wall, billable = result["wall"], result["billable"]
    assert 4 * wall < billable < 5 * wall  # billed at the sizes it ran at
    print(  # seen with -s: how long each change took on this machine
        f"placed again {result['back_after_kill']:.1f} s after the kill; "
        f"grown {result['grown_after_join']:.1f} s after the node joined"
    )


DRAINED_NODE = textwrap.dedent(
    """
    import json, subprocess, sys, threading, time
    import ray
    from scaletune.api import Session
    from scaletune.cluster import RayBackend
    from scaletune.spec import training_spec_from_dict
    from scaletune.store import resizes

    address, store, bucket, ray_cli = sys.argv[1:5]
    data = {"dataset": "breast-cancer"}
    spec = training_spec_from_dict({
        "algorithm": "xgboost",
        "instance_count": {"min": 2, "max": 5},
        # Rounds for the drain to reach the job while it runs: a `ray drain-node` process
        # started at round 25, and Ray telling the job (at round 151 on 2 cores).
        "hyperparameters": {"num_round": 600, "max_depth": 2, "eval_metric": "auc"},
        "channels": {"train": data, "validation": data},
        "cluster": {"backend": "ray", "staging": f"{bucket}/staging"},
        "checkpoint": {"every_steps": 20, "every_seconds": None},
        "retry": {"max_attempts": 0},  # a notice needs no retry
    })
    placed, drained_at, errors = [], [], []

    with RayBackend(address=address) as backend, Session(store, backend=backend) as session:
        deadline = time.monotonic() + 60  # the labelled node's CPU counted as free
        while ray.available_resources().get("CPU", 0) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        drained = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "drained" in n["Resources"]]

        def drain_after_a_checkpoint(job_id):
            try:
                while True:
                    steps = session.store.metrics(job_id, "validation:auc")
                    if steps and steps[-1].step >= 25:
                        break
                    time.sleep(0.05)
                # What Ray's autoscaler does before a preempted node ends: drain it.
                subprocess.run(
                    [ray_cli, "drain-node", f"--address={address}", "--node-id", drained[0],
                     "--reason", "DRAIN_NODE_REASON_PREEMPTION", "--reason-message", "spot",
                     "--deadline-remaining-seconds", "120"],
                    check=True, capture_output=True, timeout=120,
                )
                drained_at.append(time.monotonic())
            except Exception as error:  # reported in the output, not lost with the thread
                errors.append(repr(error))

        def on_started(group):
            placed.append(group.nodes)
            if len(placed) == 1:
                job_id = session.store.list_training_jobs()[0].id
                drain = threading.Thread(target=drain_after_a_checkpoint, args=(job_id,))
                drain.start()

        record = session.controller.run(session.controller.prepare(spec), on_started=on_started)
        attempts = session.store.attempts.of(record.id)
        write_result({
            "drained": drained,
            "groups": placed,
            "errors": errors,
            "status": record.status.value,
            "reason": record.failure_reason,
            "sizes": [a.size for a in attempts],
            "resizes": [(c.from_size, c.to_size, c.reason) for c in resizes(attempts)],
            "redone": [a.steps_redone for a in attempts],
            "notices": [n.to_json_dict() for n in session.store.notices.of(record.id)],
            "steps": [p.step for p in session.store.metrics(record.id, "validation:auc")],
        })
    """
)


def test_a_drained_node_is_a_notice_the_job_leaves_at_a_checkpoint_with_nothing_redone(
    two_nodes: str, store_path: Path, s3_bucket: str
) -> None:
    # 5 CPUs: the head's 2, the second node's 2 and a node to be drained's 1; the elastic job
    # (2 to 5 workers) starts with 5, its node drained (a spot VM's preemption, as Ray's
    # autoscaler tells it), and goes on with 4 from the checkpoint its workers save at once.
    disk = tempfile.mkdtemp(prefix="st-drained-", dir="/tmp")
    try:
        _ray(
            "start",
            f"--address={two_nodes}",
            "--num-cpus=1",
            '--resources={"drained": 1}',
            TMPDIR=disk,
        )
        result = _controller(DRAINED_NODE, two_nodes, store_path, s3_bucket, RAY)
    finally:
        with contextlib.suppress(AssertionError):  # its deadline: the machine goes
            kill_node("drained")
        shutil.rmtree(disk, ignore_errors=True)
    outcome = (result["status"], result["reason"], result["resizes"], result["errors"])
    print("the job's end:", result["status"], result["reason"])  # whole, where pytest cuts it
    assert result["status"] == "Completed", outcome
    assert result["sizes"] == [5, 4], outcome
    (drained,) = result["drained"]
    first, second = result["groups"]
    assert drained in first and drained not in second
    ((from_size, to_size, reason),) = result["resizes"]
    assert (from_size, to_size) == (5, 4)
    assert re.fullmatch(
        r"worker \d got a preemption notice \(Ray drain, 1[01]\d(\.\d+)? s\): goes on at 4 "
        r"workers from a checkpoint",
        reason,
    ), reason
    assert result["redone"][1] == 0  # from the checkpoint saved as it stopped
    (notice,) = result["notices"]
    assert notice["source"] == "Ray drain"
    assert result["steps"] == list(range(1, 601))  # each round once


SPOT_NODE = textwrap.dedent(
    """
    import sys, time
    import ray
    from scaletune.api import Session
    from scaletune.cluster import RayBackend
    from scaletune.spec import training_spec_from_dict

    address, store, bucket = sys.argv[1:4]
    data = {"dataset": "breast-cancer"}
    spec = training_spec_from_dict({
        "algorithm": "xgboost",
        "instance_count": {"min": 1, "max": 2},
        "hyperparameters": {"num_round": 20, "max_depth": 2, "eval_metric": "auc"},
        "channels": {"train": data, "validation": data},
        "cluster": {
            "backend": "ray", "staging": f"{bucket}/staging", "capacity": "mixed",
            "prices": {"on_demand": 1.0, "spot": 0.3},
        },
    })
    groups = []
    with RayBackend(address=address) as backend, Session(store, backend=backend) as session:
        deadline = time.monotonic() + 60  # the spot node's CPU counted as free
        while ray.available_resources().get("spot", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        spot = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "spot" in n["Resources"]]
        record = session.controller.run(session.controller.prepare(spec), on_started=groups.append)
        write_result({
            "spot": spot,
            "nodes": groups[0].nodes,
            "status": record.status.value,
            "reason": record.failure_reason,
            "wall": record.wall_seconds,
            "billable_by_class": record.billable_by_class,
            "cost_by_class": record.cost_by_class,
        })
    """
)


def test_a_mixed_jobs_spot_workers_run_on_spot_nodes_and_are_billed_apart(
    two_nodes: str, store_path: Path, s3_bucket: str
) -> None:
    # A spot node (the `spot` resource) beside the two: the job's fewest (1) is on-demand,
    # its second worker spot, so it runs there, and each is billed on its class. The spot
    # node has room for both: Ray's PACK would put the on-demand worker there too, were it
    # not kept off spot nodes.
    disk = tempfile.mkdtemp(prefix="st-spot-", dir="/tmp")
    try:
        _ray(
            "start",
            f"--address={two_nodes}",
            "--num-cpus=2",
            '--resources={"spot": 1, "spot_node": 1}',
            TMPDIR=disk,
        )
        result = _controller(SPOT_NODE, two_nodes, store_path, s3_bucket)
    finally:
        with contextlib.suppress(AssertionError):
            kill_node("spot_node")
        shutil.rmtree(disk, ignore_errors=True)
    assert result["status"] == "Completed", result["reason"]
    (spot,) = result["spot"]
    on_demand_node, spot_node = result["nodes"]
    assert spot_node == spot and on_demand_node != spot
    wall, billed = result["wall"], result["billable_by_class"]
    assert billed == pytest.approx({"on-demand": wall, "spot": wall})
    assert result["cost_by_class"] == pytest.approx({"on-demand": wall, "spot": 0.3 * wall})
