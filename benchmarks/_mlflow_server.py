"""A real MLflow tracking server on 127.0.0.1 (SQLite behind it, artifacts served through
it), for the tracking tests and the tracking benchmark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from scaletune.cluster import free_port

STARTUP_SECONDS = 120.0  # a cold start imports much of MLflow; a busy 2-core machine is slow
# MLflow's server starts a job runner by default (a consumer process a job queue, for its
# GenAI features): eight more interpreters importing MLflow at every start, which scaletune
# does not use and which would compete with the workers of the job beside a restart.
SERVER_ENVIRONMENT = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def start(folder: Path, port: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start `mlflow server` (this interpreter's) and wait until it answers: (process, URL)."""
    folder.mkdir(parents=True, exist_ok=True)
    # Below the kernel's ephemeral range: a port from there (as a bind to port 0 gives) was
    # taken by some outgoing connection's source port in the seconds the server takes to
    # start, on a busy 2-core machine (a CI run's tracking tests failed so).
    port = port or free_port()
    command = [
        str(Path(sys.executable).parent / "mlflow"),
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--backend-store-uri",
        f"sqlite:///{folder / 'mlflow.db'}",
        "--artifacts-destination",
        str(folder / "artifacts"),
        "--workers",
        "1",
    ]
    with (folder / "server.log").open("ab") as log:
        server = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **SERVER_ENVIRONMENT},
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_SECONDS
    while not _answers(url):
        if server.poll() is not None or time.monotonic() > deadline:
            stop(server)
            raise RuntimeError(
                f"mlflow server did not start: {(folder / 'server.log').read_text()}"
            )
        time.sleep(0.25)
    return server, url


def stop(server: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM) -> None:
    """End the server and everything it started (its workers)."""
    with suppress(ProcessLookupError):
        os.killpg(server.pid, sig)
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


@contextmanager
def running(folder: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    server, url = start(folder)
    try:
        yield server, url
    finally:
        stop(server)


def _answers(url: str) -> bool:
    with (
        suppress(urllib.error.URLError, OSError),
        urllib.request.urlopen(f"{url}/health", timeout=2) as answer,
    ):
        return bool(answer.status == 200)
    return False
