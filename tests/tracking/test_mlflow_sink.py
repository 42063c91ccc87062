"""The sink's own rules, without a server: batching, backoff, which refusals are final."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import Any, cast

import pytest
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import (
    INTERNAL_ERROR,
    INVALID_PARAMETER_VALUE,
    RESOURCE_DOES_NOT_EXIST,
    TEMPORARILY_UNAVAILABLE,
)
from mlflow.tracking import MlflowClient

from scaletune.tracking import _mlflow_sink as sink_module
from scaletune.tracking._mlflow import LogMetrics, LogParams, SetTags, StartRun, metric_name
from scaletune.tracking._mlflow_sink import (
    BATCH_LIMIT,
    Backoff,
    MlflowSink,
    Pacing,
    is_permanent,
)


def test_reports_of_one_job_batch_up_to_mlflows_limit() -> None:
    first = LogMetrics("job-1", (("auc", 0.5, 1000, 1),))
    second = LogMetrics("job-1", (("auc", 0.6, 2000, 2),))
    merged = first.merged(second)
    assert isinstance(merged, LogMetrics)
    assert merged.points == first.points + second.points
    assert first.merged(LogMetrics("job-2", second.points)) is None  # another run
    assert first.merged(SetTags("job-1", {"a": "b"})) is None  # not reports
    full = LogMetrics("job-1", tuple(("auc", 0.5, 0, step) for step in range(BATCH_LIMIT)))
    assert full.merged(second) is None


def test_backoff_doubles_to_its_cap() -> None:
    backoff = Backoff(first_seconds=0.5, most_seconds=5.0)
    assert [backoff.after(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_a_slow_server_is_sent_fewer_larger_batches() -> None:
    pacing = Pacing(least_seconds=1.0, most_seconds=10.0, share=0.01)
    assert pacing.linger_seconds == 1.0  # nothing measured yet
    pacing.took(0.002)  # a fast server: the least wait
    assert pacing.linger_seconds == 1.0
    pacing.took(0.098)  # smoothed: (0.002 + 0.098) / 2 = 0.05 s a request, 1 % of 5 s
    assert pacing.linger_seconds == pytest.approx(5.0)
    pacing.took(2.0)
    assert pacing.linger_seconds == 10.0  # capped: reports still reach MLflow while it runs


class _Recording:
    """A client that keeps what it is sent; `tagged` is set when tags arrive."""

    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []
        self.tagged = threading.Event()
        self.searched = 0

    def search_runs(self, *args: object, **kwargs: object) -> list[object]:
        self.searched += 1
        return []

    def create_run(self, *args: object, **kwargs: object) -> Any:
        return SimpleNamespace(info=SimpleNamespace(run_id="run-1"))

    def log_batch(self, run_id: str, **fields: Any) -> None:
        self.batches.append(fields)
        if fields.get("tags"):
            self.tagged.set()


def test_reports_go_at_once_when_an_update_waits_behind_them() -> None:
    client = _Recording()
    sink = MlflowSink(
        "http://127.0.0.1:1",
        "x",
        client_factory=lambda uri: cast(MlflowClient, client),
        pacing=Pacing(least_seconds=600.0, most_seconds=600.0),
    )
    sink.runs["job-1"] = "run-1"
    sink.submit(LogMetrics("job-1", (("auc", 0.5, 0, 1),)))
    sink.submit(LogMetrics("job-1", (("auc", 0.6, 0, 2),)))
    sink.submit(SetTags("job-1", {"scaletune.best": "true"}))  # as a run's end would
    assert client.tagged.wait(30), "the reports lingered though an update waited behind them"
    assert [len(batch.get("metrics", ())) for batch in client.batches] == [2, 0]
    sink.close(1)


def test_a_runs_params_go_in_one_request_with_its_first_reports() -> None:
    params = LogParams("job-1", {"eta": "0.1", "max_depth": "6"})
    first = LogMetrics("job-1", tuple(("auc", 0.5, 0, step) for step in range(BATCH_LIMIT)))
    merged = params.merged(first)
    assert isinstance(merged, LogMetrics) and merged.params == params.params
    assert params.merged(LogMetrics("job-2", first.points)) is None  # another run
    client, sink = _Recording(), MlflowSink("http://127.0.0.1:1", "x")
    sink.runs["job-1"] = "run-1"
    merged.apply(cast(MlflowClient, client), sink)
    # MLflow takes BATCH_LIMIT entities a request, params included: two requests
    assert [(len(b["metrics"]), len(b["params"])) for b in client.batches] == [
        (BATCH_LIMIT - 2, 2),
        (2, 0),
    ]


def test_a_new_job_is_given_a_run_without_looking_for_one() -> None:
    client, sink = _Recording(), MlflowSink("http://127.0.0.1:1", "x")
    sink.experiment_id = "0"
    start = StartRun("job-1", run_name="job-1", start_ms=0, tags={}, params={}, new=True)
    start.apply(cast(MlflowClient, client), sink)
    assert client.searched == 0 and sink.runs == {"job-1": "run-1"}
    StartRun("job-2", run_name="job-2", start_ms=0, tags={}, params={}).apply(
        cast(MlflowClient, client), sink
    )
    assert client.searched == 1  # one that ran before may have a run: it is looked for
    sink._failures = 1  # a retry: the try that failed may have made the run
    StartRun("job-3", run_name="job-3", start_ms=0, tags={}, params={}, new=True).apply(
        cast(MlflowClient, client), sink
    )
    assert client.searched == 2


@pytest.mark.parametrize(
    ("error", "final"),
    [
        (MlflowException("bad value", INVALID_PARAMETER_VALUE), True),
        (MlflowException("no such run", RESOURCE_DOES_NOT_EXIST), True),
        (MlflowException("connection refused", INTERNAL_ERROR), False),  # the client's own
        (MlflowException("busy", TEMPORARILY_UNAVAILABLE), False),
        (ConnectionResetError("reset by peer"), False),
        (TimeoutError("timed out"), False),
    ],
)
def test_only_a_refusal_of_the_update_itself_is_final(error: Exception, final: bool) -> None:
    assert is_permanent(error) is final


def test_metric_names_mlflow_refuses_are_made_safe() -> None:
    assert metric_name("validation:auc") == "validation:auc"
    assert metric_name("loss[0]@rank 1") == "loss_0__rank 1"


class _Unreachable:
    """A client whose every call fails as one to a server that is down."""

    def __getattr__(self, name: str) -> Any:
        def call(*args: object, **kwargs: object) -> None:
            raise ConnectionRefusedError(f"{name}: connection refused")

        return call


def test_while_the_server_is_down_the_waiting_updates_are_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sink_module, "MOST_WAITING", 3)
    caplog.set_level(logging.WARNING, logger="scaletune.tracking")
    sink = MlflowSink(
        "http://127.0.0.1:1",
        "x",
        client_factory=lambda uri: cast(MlflowClient, _Unreachable()),
        backoff=Backoff(first_seconds=0.01, most_seconds=0.01),
        pacing=Pacing(least_seconds=0.0),
    )
    for step in range(10):
        sink.submit(LogMetrics("job-1", (("auc", 0.5, 0, step),)))
    assert sink.unsent == 3
    assert sink.left_out == 7
    sink.close(0.05)
    assert any("further reports are left out" in message for message in caplog.messages)
    assert any("3 update(s) to MLflow" in message for message in caplog.messages)


def test_a_client_that_cannot_be_made_turns_mlflow_off_for_the_sink(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(uri: str) -> MlflowClient:
        raise ImportError("no module named 'mlflow'")

    caplog.set_level(logging.WARNING, logger="scaletune.tracking")
    sink = MlflowSink("http://127.0.0.1:1", "x", client_factory=broken)
    sink.submit(SetTags("job-1", {"a": "b"}))
    assert sink.flush(10)  # dropped, not waiting
    sink.submit(SetTags("job-1", {"a": "c"}))
    assert sink.unsent == 0
    sink.close(1)
    assert any("MLflow tracking is off" in message for message in caplog.messages)
