"""The XGBoost worker's communicator, with a peer and the tracker really lost mid-training."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from typing import IO, Any

from scaletune.training._ending import Fault
from scaletune.training._supervise import failure
from scaletune.worker import Failed

TRACKER = textwrap.dedent(
    """
    import json
    from xgboost.tracker import RabitTracker

    tracker = RabitTracker(n_workers=2, host_ip="127.0.0.1", port=0, sortby="task")
    tracker.start()
    print(json.dumps(tracker.worker_args()), flush=True)
    tracker.wait_for()
    """
)
# A worker says when it starts training, then how training ended and what it logged.
WORKER = textwrap.dedent(
    """
    import contextlib, io, json, sys
    import numpy as np
    import xgboost as xgb
    from scaletune.algorithms._collective import _Communicator

    rank, tracker = int(sys.argv[1]), json.loads(sys.argv[2])
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), _Communicator(
            dmlc_task_id=f"{rank:06d}", dmlc_timeout=10, dmlc_retry=1, **tracker
        ):
            print(json.dumps({"started": rank}), flush=True)
            features = np.random.default_rng(rank).normal(size=(20_000, 20))
            matrix = xgb.DMatrix(features, label=features[:, 0] > 0)
            xgb.train({"tree_method": "hist", "nthread": 1}, matrix, num_boost_round=100_000)
    except Exception as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}", "log": stderr.getvalue()}))
    """
)
TIMEOUT_SECONDS = 60


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # XGBoost's warnings as it retries the tracker
        text=True,
    )


def _said(stream: IO[str] | None) -> dict[str, Any]:
    """The next thing a process said (XGBoost's own lines, such as ranks given, are skipped)."""
    assert stream is not None
    for line in stream:
        if line.startswith("{"):
            said: dict[str, Any] = json.loads(line)
            return said
    raise AssertionError("it ended without a word")


def test_a_peer_lost_mid_training_fails_the_worker_with_the_collective_error() -> None:
    # The machine of worker 1 and the tracker is lost: the survivor's collective breaks, then
    # finalizing its communicator fails (it cannot reach the tracker). The job must see the
    # broken collective, a fault a retry mends, not finalize's error, a program's fault.
    tracker = _python(TRACKER)
    processes = [tracker]
    try:
        address = json.dumps(_said(tracker.stdout))
        processes += [_python(WORKER, str(rank), address) for rank in (0, 1)]
        survivor, doomed = processes[1:]
        assert [_said(worker.stdout)["started"] for worker in (survivor, doomed)] == [0, 1]
        os.kill(doomed.pid, signal.SIGKILL)
        os.kill(tracker.pid, signal.SIGKILL)
        ended = _said(survivor.stdout)
    finally:
        for process in processes:
            process.kill()
            process.communicate()
    assert "finalizing XGBoost's communicator failed too" in ended["log"]  # it did, and was logged
    assert "Failed to shutdown" in ended["log"] and "Failed to shutdown" not in ended["error"]
    ending = failure([Failed(0, ended["error"], "")])
    assert ending.fault == Fault.INFRASTRUCTURE, ending.reason
