"""A handle on one training job, running here or recorded in the store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scaletune.api._notebook import job_html, show_records_as_html
from scaletune.api._waiting import wait_showing
from scaletune.data import Table
from scaletune.store import AttemptRecord, Store, StoreLocation, TrainingJobRecord
from scaletune.training import Stopper, reconcile_orphan, request_job_stop

if TYPE_CHECKING:
    import pandas as pd

    from scaletune.cluster import Backend
    from scaletune.data._table import FloatArray
    from scaletune.training import Predictions


class TrainingJob:
    def __init__(
        self,
        job_id: str,
        store: Store,
        *,
        thread: threading.Thread | None = None,
        stopper: Stopper | None = None,
        worker_pids: Callable[[], list[int]] | None = None,
        location: StoreLocation | None = None,
        steps: int | None = None,
    ) -> None:
        """`location`: where the store lives (a console over it is linked from notebooks);
        `steps`: the steps the job runs when nothing stops it, where its algorithm knows."""
        self.id = job_id
        self._store = store
        self._thread = thread
        self._stopper = stopper
        self._worker_pids = worker_pids or list
        self._location = location
        self._steps = steps
        show_records_as_html()

    def describe(self) -> TrainingJobRecord:
        record = self._store.get_training_job(self.id)
        if self._thread is None:  # not run by this process: its controller may be gone
            record = reconcile_orphan(self._store, record, time.time())
        return record

    def attempts(self) -> list[AttemptRecord]:
        """Every attempt so far: the first, each retry, each resume by hand."""
        return self._store.attempts.of(self.id)

    def metrics(self, name: str | None = None) -> pd.DataFrame:
        """One row per reported point: name, step, value, time (UTC)."""
        import pandas as pd

        points = self._store.metrics(self.id, name)
        frame = pd.DataFrame(
            [(p.name, p.step, p.value, p.time) for p in points],
            columns=["name", "step", "value", "time"],
        )
        frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
        return frame

    def predict(
        self,
        data: str | Path | Table | FloatArray,
        *,
        instance_count: int = 1,
        backend: Backend | None = None,
        staging: Path | str | None = None,
    ) -> Predictions:
        """Score rows with this job's model (batch prediction): a CSV path or URL in a
        channel's format, a built-in dataset (`"breast-cancer"`, its test split, or
        `"digits:validation"`), a Table or a feature matrix. With `instance_count` above 1
        the rows are split over that many workers of `backend` (by default a local one,
        started for the call) and come back in their order; they pass through `staging`
        (by default the job's `cluster.staging`)."""
        from scaletune.training import BatchPredictor, read_input

        if isinstance(data, Table):
            table = data
        elif isinstance(data, str | Path):
            table = read_input(str(data))
        else:
            features = np.asarray(data, dtype=np.float32)
            table = Table(features, np.zeros(len(features), np.float32), "an array")
        if backend is not None or instance_count == 1:
            predictor = BatchPredictor(self._store, backend)
            return predictor.predict(self.id, table, instance_count=instance_count, staging=staging)
        from scaletune.cluster import LocalBackend

        with LocalBackend() as local:
            return BatchPredictor(self._store, local).predict(
                self.id, table, instance_count=instance_count, staging=staging
            )

    def wait(self, timeout: float | None = None) -> TrainingJobRecord:
        """Block until the job ends; Ctrl-C while waiting stops the job. In a notebook, one
        display shows the job as it runs."""
        if self._thread is not None:
            wait_showing(
                self._thread, timeout, self.stop, f"training job {self.id!r}", self._repr_html_
            )
        return self.describe()

    def _repr_html_(self) -> str:
        """How a notebook shows the job: status, progress, metrics, a curve, the console."""
        series: dict[str, list[tuple[int, float]]] = {}
        for point in self._store.metrics(self.id):
            series.setdefault(point.name, []).append((point.step, point.value))
        console = None if self._location is None else self._location.console_url()
        return job_html(self.describe(), series, self._steps, console, time.time())

    def stop(self) -> None:
        """Ask the job to stop, by the rule `jobs stop` and the console follow: a running job's
        controller ends its workers and records it as Stopped, a paused trial is Stopped at
        once, one whose controller is gone is marked ended."""
        if self._stopper is not None:
            self._stopper.request()
        request_job_stop(self._store, self.id, time.time(), via="Python API")

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the running workers (empty when not running here)."""
        return self._worker_pids()
