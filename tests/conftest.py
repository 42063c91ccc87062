"""Shared fixtures. Every test fails if it leaves processes, temp dirs or listening ports."""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO

import psutil
import pytest

from scaletune.api import Session
from scaletune.cluster import LocalBackend

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BANK_MARKETING_FILE = SHARED_DATA / "bank-marketing" / "bank-additional-full.csv"

# pytest-timeout's SIGALRM cannot reach a main thread blocked inside C (a Ray call that never
# returns, say): past the timeout and this grace, a watchdog thread dumps every thread's stack
# and ends the run. A hang then costs minutes and says where, not the CI's whole budget.
# (SCALETUNE_TEST_HANG_GRACE shortens the grace for the watchdog's own test.)
HANG_GRACE_SECONDS = float(os.environ.get("SCALETUNE_TEST_HANG_GRACE", "120"))
_hang_report: IO[str] | None = None  # the terminal's stderr, kept before capture takes fd 2


def pytest_configure(config: pytest.Config) -> None:
    global _hang_report
    _hang_report = os.fdopen(os.dup(sys.stderr.fileno()), "w")
    config.add_cleanup(_hang_report.close)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects any
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The serial tests that bound a latency or a timeout (`serial(timing=True)`) first: they
    mostly wait, and `make test` type-checks beside the serial phase's start (beside a CPU hog,
    0 failures in 40 runs). Otherwise the order stays.

    `make unit-serial` collects only the files whose text marks a test serial: a test marked
    some other way would run in neither phase, so its run fails here."""
    unseen = {
        str(item.path)
        for item in items
        if item.get_closest_marker("serial") and "mark.serial" not in item.path.read_text()
    }
    if unseen:
        raise pytest.UsageError(f"tests marked serial where `mark.serial` is not written: {unseen}")
    items.sort(key=lambda item: not _bounds_a_timing(item))


def _bounds_a_timing(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("serial")
    return marker is not None and bool(marker.kwargs.get("timing", False))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None]:
    timeout = float(item.config.getini("timeout") or 0)
    if timeout <= 0 or _hang_report is None:
        yield
        return
    faulthandler.dump_traceback_later(timeout + HANG_GRACE_SECONDS, exit=True, file=_hang_report)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


_allowed_pids: set[int] = set()
_allowed_roots: set[int] = set()  # whole process trees a module-wide service owns (Ray)


def _children() -> set[int]:
    allowed: set[int] = set()
    for root in _allowed_roots:
        with contextlib.suppress(psutil.NoSuchProcess):
            allowed |= {root} | {c.pid for c in psutil.Process(root).children(recursive=True)}
    return {child.pid for child in psutil.Process().children(recursive=True)} - allowed


@contextlib.contextmanager
def allow_process_tree(roots: set[int]) -> Iterator[None]:
    """Processes under these (and those they start later) are not leaks while this lasts."""
    _allowed_roots.update(roots)
    try:
        yield
    finally:
        _allowed_roots.difference_update(roots)


def _listening() -> set[tuple[str, int]]:
    return {
        (conn.laddr.ip, conn.laddr.port)
        for conn in psutil.Process().net_connections(kind="inet")
        if conn.status == psutil.CONN_LISTEN
    }


@pytest.fixture(autouse=True)
def no_leaks(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    scratch = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("TMPDIR", str(scratch))
    processes_before, ports_before = _children(), _listening()
    yield
    deadline = time.monotonic() + 5
    leaked = _children() - processes_before - _allowed_pids
    while leaked and time.monotonic() < deadline:
        time.sleep(0.05)
        leaked = _children() - processes_before - _allowed_pids
    assert not leaked, f"test left processes running: {sorted(leaked)}"
    assert not list(scratch.iterdir()), f"test left temp files: {list(scratch.iterdir())}"
    assert not (_listening() - ports_before), "test left listening sockets"


@pytest.fixture(scope="session")
def warm_backend() -> Iterator[LocalBackend]:
    """One warm pool for a test process (a pytest-xdist worker runs many modules): its fork
    server's imports are paid once, not per module; its idle workers are not leaks."""
    with pooled(LocalBackend(max_idle_workers=4)) as backend:
        backend.warm_up()  # now: before any test's snapshot of its processes
        _allowed_pids.update(backend.server_pids)
        yield backend


@contextlib.contextmanager
def pooled(backend: LocalBackend) -> Iterator[LocalBackend]:
    """A backend whose idle workers are not leaks while it lives; closed after."""
    original = backend._give_back

    def give_back_and_allow(workers):
        original(workers)
        _allowed_pids.update(backend.idle_pids, backend.server_pids)

    backend._give_back = give_back_and_allow  # type: ignore[method-assign]
    yield backend
    backend.close()
    _allowed_pids.clear()


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty store in a test's own folder; the CLI and Session() default to it too."""
    path = tmp_path / "store" / "scaletune.db"
    monkeypatch.setenv("SCALETUNE_STORE", str(path))
    monkeypatch.setenv("SCALETUNE_HOME", str(tmp_path / "home"))
    return path


@pytest.fixture
def session(store_path: Path, warm_backend: LocalBackend) -> Iterator[Session]:
    with Session(store_path, backend=warm_backend) as opened:
        yield opened


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A local S3 (moto's server) for the session; the AWS variables point this process and
    every process it starts afterwards (workers, Ray's) at it."""
    moto_server = pytest.importorskip("moto.server", reason="object-storage tests need moto")
    pytest.importorskip("s3fs", reason="s3:// URLs need s3fs")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    variables = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in variables.items():
            patch.setenv(name, value)
        yield endpoint
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # its clients point at this server
    server.stop()


@pytest.fixture
def s3_bucket(s3_endpoint: str, request: pytest.FixtureRequest) -> str:
    """An empty bucket of the test's own: its s3:// URL."""
    import fsspec

    name = "test-" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:20]
    fsspec.filesystem("s3").mkdir(name)
    return f"s3://{name}"


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """Python's Ctrl-C handler, even where the suite was started with SIGINT ignored (as a
    shell's background job is)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def bank_marketing_file() -> Path:
    if not BANK_MARKETING_FILE.exists():
        pytest.skip(f"{BANK_MARKETING_FILE} is missing (shared data)")
    return BANK_MARKETING_FILE


def pid_alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


class SleepingClock:
    """A fake clock that moves only when slept on, keeping each sleep asked for."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.02) -> None:
    """Poll real processes (not a clock we own): workers run in other processes."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


os.environ.setdefault("PYTHONHASHSEED", "0")


def require_tensorflow(reason: str) -> None:
    """Skip the calling module where TensorFlow and tf-keras are not installed; where CI asks
    for them (SCALETUNE_REQUIRE_TENSORFLOW), a missing one fails instead. Looked up without
    importing: each pytest process collects every module, and TensorFlow takes 3 s to import."""
    import importlib.util

    missing = [
        name for name in ("tensorflow", "tf_keras") if importlib.util.find_spec(name) is None
    ]
    if not missing:
        return
    if os.environ.get("SCALETUNE_REQUIRE_TENSORFLOW"):
        raise ImportError(
            f"{', '.join(missing)} not installed, and SCALETUNE_REQUIRE_TENSORFLOW is set"
        )
    pytest.skip(f"{reason} (missing: {', '.join(missing)})", allow_module_level=True)
