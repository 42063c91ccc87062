"""The writer that takes a running job's reports to the store: in order, past its memory bound
into the job's file, and what it could not write kept there for the job's resume."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

import pytest

from scaletune.errors import StoreUnavailableError
from scaletune.store import MetricPoint, RejectedMetric, Store
from scaletune.training._report_writer import ReportWriter, replay


class _Store:
    """Records what reaches it; while `away` is set, a write waits (as the store's patience
    does) until `back` is set, or gives up at once when `gives_up`."""

    def __init__(self) -> None:
        self.writes: list[tuple[Any, ...]] = []
        self.back = threading.Event()
        self.back.set()
        self.waiting = threading.Event()
        self.gives_up = False
        self.refuses: Exception | None = None
        self.attempts = self

    def _arrive(self, *write: Any) -> None:
        if self.refuses is not None:
            raise self.refuses
        if self.gives_up:
            raise StoreUnavailableError("store 'x' did not answer for 600.0 s: refused")
        if not self.back.is_set():
            self.waiting.set()
            self.back.wait(30)
        self.writes.append(write)

    def append_metrics(self, job_id: str, points: list[MetricPoint]) -> None:
        if points:
            self._arrive("metrics", job_id, [p.step for p in points])

    def append_rejected(self, job_id: str, items: list[RejectedMetric]) -> None:
        self._arrive("rejected", job_id, [r.step for r in items])

    def set_checkpoint(self, job_id: str, number: int, step: int) -> None:
        self._arrive("checkpoint", job_id, number, step)


def _points(*steps: int) -> list[MetricPoint]:
    return [MetricPoint("loss", step, 1.0 / step, float(step)) for step in steps]


def test_reports_wait_in_the_jobs_file_past_the_memory_bound_and_land_in_order(
    tmp_path: Path,
) -> None:
    store, spill = _Store(), tmp_path / "unsent-reports.jsonl"
    writer = ReportWriter(cast(Store, store), "job-1", spill, memory_points=4)
    store.back.clear()  # the store is away
    writer.metrics(_points(1, 2, 3))
    assert store.waiting.wait(30)  # the writer is stuck on them
    writer.metrics(_points(4, 5, 6))  # past the bound: to the file
    writer.rejected([RejectedMetric("loss", 6, "nan", 6.0)])
    writer.checkpoint(1, 6)
    writer.metrics(_points(7))
    assert len(spill.read_text().splitlines()) == 4
    store.back.set()
    writer.drain()
    writer.close()
    assert store.writes == [
        ("metrics", "job-1", [1, 2, 3]),
        ("metrics", "job-1", [4, 5, 6]),
        ("rejected", "job-1", [6]),
        ("checkpoint", "job-1", 1, 6),
        ("metrics", "job-1", [7]),
    ]
    assert not spill.exists()


def test_what_a_store_away_too_long_did_not_take_is_kept_and_written_on_resume(
    tmp_path: Path,
) -> None:
    store, spill = _Store(), tmp_path / "unsent-reports.jsonl"
    store.gives_up = True
    writer = ReportWriter(cast(Store, store), "job-1", spill, memory_points=2)
    writer.metrics(_points(1, 2))
    writer.checkpoint(1, 2)
    writer.metrics(_points(3))  # past the bound
    with pytest.raises(StoreUnavailableError, match="did not answer"):
        writer.drain()
    writer.close()
    assert spill.exists()

    back = _Store()
    assert replay(cast(Store, back), "job-1", spill) == 3
    assert back.writes == [
        ("metrics", "job-1", [1, 2]),
        ("checkpoint", "job-1", 1, 2),
        ("metrics", "job-1", [3]),
    ]
    assert not spill.exists()
    assert replay(cast(Store, back), "job-1", spill) == 0  # nothing left: nothing written


def test_runs_of_reports_go_as_one_write(tmp_path: Path) -> None:
    store, spill = _Store(), tmp_path / "unsent-reports.jsonl"
    store.back.clear()
    writer = ReportWriter(cast(Store, store), "job-1", spill)
    writer.metrics(_points(1))
    assert store.waiting.wait(30)
    for step in (2, 3, 4):  # queued behind the first while the store is away
        writer.metrics(_points(step))
    store.back.set()
    writer.drain()
    writer.close()
    assert store.writes == [("metrics", "job-1", [1]), ("metrics", "job-1", [2, 3, 4])]


def test_a_write_the_store_refuses_ends_the_wait_with_its_error(tmp_path: Path) -> None:
    store, spill = _Store(), tmp_path / "unsent-reports.jsonl"
    store.refuses = ValueError("a value the database refused")
    writer = ReportWriter(cast(Store, store), "job-1", spill)
    writer.metrics(_points(1))
    with pytest.raises(ValueError, match="refused"):
        writer.drain()  # not a wait for ever
    writer.close()
    assert spill.exists()  # kept, as for a store away too long
