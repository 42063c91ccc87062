"""Which trackers a job has, from its `[tracking]`: TensorBoard event files (on by default
where TensorBoard is installed) and an MLflow run (when a tracking URI is set). One MLflow
sink, a queue and a thread, serves every job of a process that tracks to the same server."""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from scaletune.errors import InvalidInputError
from scaletune.spec import MLFLOW_URI_VARIABLE, TrackingSpec, mlflow_uri_problem
from scaletune.tracking._events import (
    JobEnd,
    JobTracker,
    TrackedJob,
    TrackedTuning,
    TuningEnd,
    TuningTracker,
)
from scaletune.tracking._mlflow import MlflowJob, MlflowTuning
from scaletune.tracking._mlflow_sink import MlflowSink
from scaletune.tracking._tensorboard import TensorBoardJob, TensorBoardTuning

log = logging.getLogger("scaletune.tracking")
CLOSE_SECONDS = 10.0  # what a closing session gives MLflow to take what is still queued
TENSORBOARD_FOLDER = "tensorboard"
_T = TypeVar("_T")


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _refuses_folders(uri: str) -> bool:
    """Whether MLflow would refuse `uri` as a folder store: MLflow 3 keeps its file store in
    maintenance, opened only where MLFLOW_ALLOW_FILE_STORE says so. (MLflow is imported here
    only for a folder URI, which the job imports it for anyway.)"""
    if urllib.parse.urlparse(uri).scheme.lower() not in {"", "file"}:
        return False
    from mlflow import environment_variables

    allowed = getattr(environment_variables, "MLFLOW_ALLOW_FILE_STORE", None)
    return allowed is not None and not allowed.get()


class Tracking:
    """Makes each job's trackers; owns the MLflow sinks until `close`."""

    def __init__(self, jobs_dir: Path, environ: Mapping[str, str] | None = None) -> None:
        self.jobs_dir = jobs_dir
        self.environ = os.environ if environ is None else environ
        self._sinks: dict[tuple[str, str], MlflowSink] = {}
        self._lock = threading.Lock()
        self._closed = False

    def check(self, spec: TrackingSpec) -> None:
        """What a job asks for can be done here (a bad input, before anything is written)."""
        uri = self.mlflow_uri(spec)
        problem = None if uri is None or spec.mlflow else mlflow_uri_problem(uri)
        if problem is not None:  # the file's own URI was checked as it was read
            raise InvalidInputError(f"{MLFLOW_URI_VARIABLE}={uri!r}: {problem}")
        if uri is not None and not _installed("mlflow"):
            raise InvalidInputError(
                f"tracking.mlflow={self.mlflow_uri(spec)!r} needs MLflow: "
                "pip install 'scaletune[mlflow]'"
            )
        if uri is not None and _refuses_folders(uri):
            raise InvalidInputError(
                f"tracking.mlflow={uri!r}: this MLflow keeps no runs in a folder unless "
                "MLFLOW_ALLOW_FILE_STORE=true is set; give a database, sqlite:///mlflow.db say"
            )
        if isinstance(spec.tensorboard, Path) and not _installed("tensorboard"):
            raise InvalidInputError(
                f"tracking.tensorboard={str(spec.tensorboard)!r} needs TensorBoard: "
                "pip install 'scaletune[tensorboard]'"
            )

    def mlflow_uri(self, spec: TrackingSpec) -> str | None:
        return spec.mlflow_uri(self.environ)

    def tracks(self, spec: TrackingSpec) -> bool:
        """Whether a job with this `[tracking]` has any tracker."""
        return self._writes_tensorboard(spec) or self.mlflow_uri(spec) is not None

    def job(self, spec: TrackingSpec, job: TrackedJob) -> Trackers:
        return Trackers(
            self._made(
                spec,
                self._job_folder(spec, job),
                lambda folder: TensorBoardJob(folder, job),
                lambda sink: MlflowJob(sink, job),
            )
        )

    def tuning(self, spec: TrackingSpec, tuning: TrackedTuning) -> TuningTracker:
        return TuningTrackers(
            self._made(
                spec,
                self._tuning_folder(spec, tuning.id),
                lambda folder: TensorBoardTuning(folder, tuning),
                lambda sink: MlflowTuning(sink, tuning),
            )
        )

    def _made(
        self,
        spec: TrackingSpec,
        folder: Path | None,
        tensorboard: Callable[[Path], _T],
        mlflow: Callable[[MlflowSink], _T],
    ) -> list[_T]:
        """The trackers the spec asks for. TensorBoard's may fail to start (a folder not
        writable, say): a warning, and the job goes on without it."""
        made: list[_T] = []
        if folder is not None:
            try:
                made.append(tensorboard(folder))
            except Exception as exc:
                log.warning("scaletune: TensorBoard tracking is off for this job: %s", exc)
        sink = self._sink(spec)
        if sink is not None:
            made.append(mlflow(sink))
        return made

    def _job_folder(self, spec: TrackingSpec, job: TrackedJob) -> Path | None:
        """Where a job's event files go: its folder's `tensorboard/`, or a sub-folder of the
        one the spec names; a trial's, in a sub-folder of its tuning job's."""
        if job.tuning_job_id is not None:
            above = self._tuning_folder(spec, job.tuning_job_id)
            return None if above is None else above / job.id
        if not self._writes_tensorboard(spec):
            return None
        if isinstance(spec.tensorboard, Path):
            return spec.tensorboard / job.id
        return self.jobs_dir / job.id / TENSORBOARD_FOLDER

    def _tuning_folder(self, spec: TrackingSpec, tuning_id: str) -> Path | None:
        """A tuning job's: its HParams experiment, and its trials' folders under it."""
        if not self._writes_tensorboard(spec):
            return None
        if isinstance(spec.tensorboard, Path):
            return spec.tensorboard / tuning_id
        return self.jobs_dir / tuning_id / TENSORBOARD_FOLDER

    @staticmethod
    def _writes_tensorboard(spec: TrackingSpec) -> bool:
        return spec.tensorboard is not False and _installed("tensorboard")

    def _sink(self, spec: TrackingSpec) -> MlflowSink | None:
        uri = self.mlflow_uri(spec)
        if uri is None:
            return None
        key = (uri, spec.mlflow_experiment)
        with self._lock:
            sink = self._sinks.get(key)
            if sink is None:
                sink = self._sinks[key] = MlflowSink(uri, spec.mlflow_experiment)
                if len(self._sinks) == 1:
                    atexit.register(self.close)
            return sink

    def flush(self, timeout_seconds: float) -> bool:
        """Wait until every MLflow update so far was sent (True), or the time is up."""
        with self._lock:
            sinks = list(self._sinks.values())
        return all(sink.flush(timeout_seconds) for sink in sinks)

    def close(self, timeout_seconds: float = CLOSE_SECONDS) -> None:
        with self._lock:
            sinks, self._sinks = list(self._sinks.values()), {}
        for sink in sinks:
            sink.close(timeout_seconds)
        if sinks:
            atexit.unregister(self.close)


class Trackers:
    """A job's trackers as one. A tracker that raises is warned of once and left out: what
    tracks a job never fails it."""

    def __init__(self, trackers: list[JobTracker]) -> None:
        self._trackers = trackers

    def __bool__(self) -> bool:
        return bool(self._trackers)

    def report(self, step: int, metrics: Mapping[str, float], time: float) -> None:
        for tracker in list(self._trackers):
            try:
                tracker.report(step, metrics, time)
            except Exception as exc:
                self._drop(tracker, exc)

    def finish(self, end: JobEnd) -> None:
        for tracker in list(self._trackers):
            try:
                tracker.finish(end)
            except Exception as exc:
                self._drop(tracker, exc)

    def _drop(self, tracker: JobTracker, error: Exception) -> None:
        log.warning("scaletune: %s stopped tracking: %s", _kind(tracker), error)
        self._trackers.remove(tracker)


class TuningTrackers:
    def __init__(self, trackers: list[TuningTracker]) -> None:
        self._trackers = trackers

    def finish(self, end: TuningEnd) -> None:
        for tracker in self._trackers:
            try:
                tracker.finish(end)
            except Exception as exc:
                log.warning("scaletune: %s stopped tracking: %s", _kind(tracker), exc)


def _kind(tracker: object) -> str:
    return "MLflow" if isinstance(tracker, MlflowJob | MlflowTuning) else "TensorBoard"
