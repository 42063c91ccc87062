"""One background thread a tracking server: what scaletune tells MLflow waits in a queue and
is sent in order, batched, and retried while the server is down or slow, so that tracking
never fails or stalls a job. The job's store stays complete whatever MLflow does."""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scaletune.clock import Clock, SystemClock

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

log = logging.getLogger("scaletune.tracking")

# MLflow's client waits 120 s a request and retries 7 times with backoff by default: minutes
# on a dead server, and its retries would block ours. Ours are the ones that count. Ending a
# run prints its link to stdout, which would break `--json`. A user's own settings win.
CLIENT_ENVIRONMENT = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}
BATCH_LIMIT = 1000  # MLflow's log_batch takes at most 1000 metrics
# While the server is down, updates wait in memory up to this many; past it, further reports
# are left out (counted, and named in a warning): the store has them all.
MOST_WAITING = 100_000


@dataclass
class Pacing:
    """How long reports wait to go as one request. A tracking server spends its CPU mostly
    per request, whatever the request's size, and it often shares the workers' machine: so
    requests are spaced to keep the server busy at most `share` of the time. A slow server is
    sent fewer, larger batches; a fast one gets them every `least_seconds`."""

    least_seconds: float = 1.0
    most_seconds: float = 10.0
    share: float = 0.01
    _request_seconds: float | None = None  # smoothed: one slow request does not set the pace

    def took(self, seconds: float) -> None:
        """A batch of reports took `seconds` to send."""
        last = self._request_seconds
        self._request_seconds = seconds if last is None else (last + seconds) / 2.0

    @property
    def linger_seconds(self) -> float:
        spaced = (self._request_seconds or 0.0) / self.share
        return min(max(self.least_seconds, spaced), self.most_seconds)


@dataclass(frozen=True)
class Backoff:
    """Waits between tries of an update the server did not take: doubling, capped."""

    first_seconds: float = 0.5
    most_seconds: float = 5.0

    def after(self, failures: int) -> float:
        return min(self.first_seconds * 2.0 ** max(failures - 1, 0), self.most_seconds)


class Operation:
    """An update for the server. `apply` raises on failure: retried unless `is_permanent`."""

    description = "update"
    lingers = False  # waits for others to batch with (the sink's `Pacing`)

    def apply(self, client: MlflowClient, sink: MlflowSink) -> None:
        raise NotImplementedError

    def merged(self, other: Operation) -> Operation | None:
        """One operation doing this and then `other`, where they batch; else None."""
        return None


def is_permanent(error: BaseException) -> bool:
    """The server refused the update itself (a bad value, a run gone): no retry mends it.
    A connection refused, a time-out or a 5xx / 429 is worth another try."""
    from mlflow.exceptions import MlflowException

    if not isinstance(error, MlflowException):
        return False
    status: int = error.get_http_status_code()  # type: ignore[no-untyped-call]
    return 400 <= status < 500 and status != 429


class MlflowSink:
    """Sends operations to one tracking URI, in order, from a thread of its own."""

    def __init__(
        self,
        uri: str,
        experiment: str,
        *,
        backoff: Backoff | None = None,
        clock: Clock | None = None,
        client_factory: Callable[[str], MlflowClient] | None = None,
        pacing: Pacing | None = None,
    ) -> None:
        self.uri, self.experiment = uri, experiment
        self.backoff = backoff or Backoff()
        self.clock = clock or SystemClock()
        self._client_factory = client_factory or _client
        self.pacing = pacing or Pacing()
        self._pending: deque[tuple[float, Operation]] = deque()  # (when submitted, what)
        self._hurry = 0  # flushes waiting: nothing lingers
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing_at: float | None = None  # monotonic: when close() stops waiting
        self._failures = 0  # tries that failed in a row (the server is down while > 0)
        self.runs: dict[str, str] = {}  # scaletune id -> MLflow run id
        self.experiment_id: str | None = None
        self.sent = 0
        self.left_out = 0  # reports not queued: MOST_WAITING were already waiting
        self._off = False  # MLflow's client could not be made: nothing is queued

    def submit(self, operation: Operation) -> None:
        with self._changed:
            if self._off or (self._closing_at is not None and self._thread is None):
                return  # closed, or MLflow unusable: the store keeps everything
            if operation.lingers and len(self._pending) >= MOST_WAITING:
                if not self.left_out:
                    log.warning(
                        "scaletune: %d updates wait for MLflow at %s; further reports are "
                        "left out of its run (the store has them)",
                        MOST_WAITING,
                        self.uri,
                    )
                self.left_out += 1
                return
            self._pending.append((self.clock.monotonic(), operation))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._send_all, name=f"scaletune-mlflow {self.uri}", daemon=True
                )
                self._thread.start()
            # A report behind a lingering one changes nothing the sending thread waits on:
            # waking it for each would cost the controller a thread switch a report.
            if len(self._pending) == 1 or not operation.lingers:
                self._changed.notify()

    def then(self, operation: Operation) -> None:
        """Send `operation` right after the one being applied (from within `apply`)."""
        with self._changed:
            self._pending.insert(1, (self.clock.monotonic(), operation))

    @property
    def retrying(self) -> bool:
        """The update being applied failed its last try (its effect may have landed)."""
        return self._failures > 0

    @property
    def unsent(self) -> int:
        with self._changed:
            return len(self._pending)

    def flush(self, timeout_seconds: float) -> bool:
        """Wait until everything submitted was sent (True), or `timeout_seconds` passed."""
        deadline = self.clock.monotonic() + timeout_seconds
        with self._changed:
            self._hurry += 1
            self._changed.notify_all()
            try:
                while self._pending and self.clock.monotonic() < deadline:
                    self._changed.wait(min(0.05, max(deadline - self.clock.monotonic(), 0.0)))
                return not self._pending
            finally:
                self._hurry -= 1

    def close(self, timeout_seconds: float) -> None:
        """Send what is pending for at most `timeout_seconds` (while the server answers; one
        more try if it is down), then warn of what was not sent."""
        with self._changed:
            thread = self._thread
            if self._failures:  # down: one more try, not the whole wait
                timeout_seconds = min(timeout_seconds, self.backoff.most_seconds)
            self._closing_at = self.clock.monotonic() + timeout_seconds
            self._changed.notify_all()
        if thread is not None:
            thread.join(timeout_seconds + 1.0)
        with self._changed:
            unsent, self._thread = len(self._pending), None
            self._pending.clear()
        if unsent:
            log.warning(
                "scaletune: %d update(s) to MLflow at %s were not sent (the server did not "
                "answer); the job's own store has everything",
                unsent,
                self.uri,
            )

    def _send_all(self) -> None:
        try:
            client = self._client_factory(self.uri)
        except Exception as exc:  # mlflow missing or broken: nothing can be sent
            log.warning("scaletune: MLflow tracking is off: %s", exc)
            with self._changed:
                self._off = True
                self._pending.clear()
                self._changed.notify_all()
            return
        while True:
            with self._changed:
                while not self._pending and not self._closing():
                    self._changed.wait()
                if not self._pending or self._past_closing():
                    self._changed.notify_all()
                    return
                submitted, head = self._pending[0]
                hold = submitted + self.pacing.linger_seconds - self.clock.monotonic()
                if head.lingers and hold > 0 and not self._send_now():
                    self._changed.wait(hold)
                    continue
                operation, taken = self._next_batch()
            started = self.clock.monotonic()
            try:
                operation.apply(client, self)
            except Exception as exc:
                if is_permanent(exc):
                    log.warning(
                        "scaletune: MLflow at %s refused an update (%s): %s",
                        self.uri,
                        operation.description,
                        _first_line(exc),
                    )
                    self._done(taken)
                else:
                    self._failed(exc)
                continue
            if operation.lingers:
                self.pacing.took(self.clock.monotonic() - started)
            self._done(taken)

    def _send_now(self) -> bool:
        """Lingering reports go at once when asked to, or when an update that does not
        linger (a run's end, say) waits behind them."""
        return bool(self._hurry) or self._closing() or not self._pending[-1][1].lingers

    def _next_batch(self) -> tuple[Operation, int]:
        operation, taken = self._pending[0][1], 1
        while taken < len(self._pending):
            merged = operation.merged(self._pending[taken][1])
            if merged is None:
                break
            operation, taken = merged, taken + 1
        return operation, taken

    def _done(self, taken: int) -> None:
        with self._changed:
            for _ in range(taken):
                self._pending.popleft()
            self.sent += taken
            if self._failures:
                log.warning("scaletune: MLflow at %s answers again: sending", self.uri)
            self._failures = 0
            self._changed.notify_all()

    def _failed(self, error: BaseException) -> None:
        with self._changed:
            self._failures += 1
            if self._failures == 1:
                log.warning(
                    "scaletune: MLflow at %s did not answer (%s); updates wait and are "
                    "retried, the job goes on",
                    self.uri,
                    _first_line(error),
                )
            until = self.clock.monotonic() + self.backoff.after(self._failures)
            while True:  # new submissions wake the thread: they do not cut the wait short
                limit = until if self._closing_at is None else min(until, self._closing_at)
                left = limit - self.clock.monotonic()
                if left <= 0:
                    return
                self._changed.wait(left)

    def _closing(self) -> bool:
        return self._closing_at is not None

    def _past_closing(self) -> bool:
        return self._closing_at is not None and self.clock.monotonic() >= self._closing_at


def _client(uri: str) -> MlflowClient:
    for name, value in CLIENT_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


# What MLflow's client says of a server it cannot reach, behind a long URL: the gist.
_GIST = (
    ("NewConnectionError", "connection refused"),
    ("Connection aborted", "connection reset"),
    ("ConnectionResetError", "connection reset"),
    ("RemoteDisconnected", "connection closed"),
    ("Read timed out", "timed out"),
    ("ConnectTimeout", "timed out"),
)


def _first_line(error: BaseException) -> str:
    text = str(error)
    for marker, gist in _GIST:
        if marker in text:
            return gist
    lines = text.strip().splitlines()
    return (lines[0] if lines else type(error).__name__)[:300]


def experiment_id(client: MlflowClient, sink: MlflowSink) -> str:
    """The experiment's id, made if it does not exist yet (by another process, meanwhile)."""
    if sink.experiment_id is None:
        from mlflow.exceptions import MlflowException

        found = client.get_experiment_by_name(sink.experiment)
        if found is None:
            try:
                sink.experiment_id = client.create_experiment(sink.experiment)
            except MlflowException as exc:
                if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                found = client.get_experiment_by_name(sink.experiment)
        if found is not None:
            sink.experiment_id = found.experiment_id
    assert sink.experiment_id is not None
    return sink.experiment_id


def find_run(client: MlflowClient, sink: MlflowSink, scaletune_id: str) -> str | None:
    """The run recorded for a scaletune job before (by this process or an earlier one)."""
    known = sink.runs.get(scaletune_id)
    if known is not None:
        return known
    from mlflow.entities import ViewType

    runs: Any = client.search_runs(
        [experiment_id(client, sink)],
        filter_string=f"tags.`{ID_TAG}` = '{scaletune_id}'",
        run_view_type=ViewType.ALL,
        max_results=1,
    )
    if not runs:
        return None
    run_id: str = runs[0].info.run_id
    sink.runs[scaletune_id] = run_id
    return run_id


ID_TAG = "scaletune.id"
