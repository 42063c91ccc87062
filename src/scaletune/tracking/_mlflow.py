"""A training job as an MLflow run (its hyperparameters as params, every report as a metric
at its step, how it ended as tags, its model as an artifact in its MLflow flavour); a tuning
job as a parent run with its trials nested under it and the best one tagged. A retried or
resumed job stays one run: it is found again by its `scaletune.id` tag."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scaletune.store import JobStatus
from scaletune.tracking._events import JobEnd, TrackedJob, TrackedTuning, TuningEnd
from scaletune.tracking._mlflow_sink import (
    BATCH_LIMIT,
    ID_TAG,
    MlflowSink,
    Operation,
    experiment_id,
    find_run,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

PARENT_TAG = "mlflow.parentRunId"
PARAM_LIMIT = 100  # params a log_batch call takes
_TEXT_LIMIT = 5000  # MLflow keeps 6000 characters of a param or tag value
_NOT_A_NAME = re.compile(r"[^\w.\- :/]")  # MLflow's metric and param names

# A Paused trial waits for a promotion (Hyperband's promotion type): scheduled, not ended. A
# trial stopped early by its tuning job ran as asked, for less: FINISHED, tagged (KILLED is
# what MLflow shows for a run ended by hand).
RUN_STATUS = {
    JobStatus.COMPLETED: "FINISHED",
    JobStatus.FAILED: "FAILED",
    JobStatus.STOPPED: "KILLED",
    JobStatus.PAUSED: "SCHEDULED",
}


def metric_name(name: str) -> str:
    return _NOT_A_NAME.sub("_", name)


@dataclass(frozen=True)
class StartRun(Operation):
    """Find the scaletune job's run, or make it (nested under its parent's, if any)."""

    scaletune_id: str
    run_name: str
    start_ms: int
    tags: Mapping[str, str]
    params: Mapping[str, str]
    parent_id: str | None = None
    earlier: Sequence[tuple[str, float, int, int]] = ()  # name, value, time (ms), step
    new: bool = False  # the job never started before: it has no run to find
    description = "start a run"

    def apply(self, client: MlflowClient, sink: MlflowSink) -> None:
        # A retry looks even for a new job's run: the try that failed may have made it.
        trusted_new = self.new and not sink.retrying
        run_id = None if trusted_new else find_run(client, sink, self.scaletune_id)
        if run_id is None:
            tags = {**self.tags, ID_TAG: self.scaletune_id}
            parent = None if self.parent_id is None else find_run(client, sink, self.parent_id)
            if parent is not None:
                tags[PARENT_TAG] = parent
            run = client.create_run(
                experiment_id(client, sink),
                start_time=self.start_ms,
                tags=tags,
                run_name=self.run_name,
            )
            run_id = run.info.run_id
            sink.runs[self.scaletune_id] = run_id
            if self.earlier:
                sink.then(LogMetrics(self.scaletune_id, tuple(self.earlier)))
        else:  # resumed or retried by another controller: the same run goes on
            client.update_run(run_id, status="RUNNING")
        if self.params:  # the same values again on a resume: MLflow accepts them
            sink.then(LogParams(self.scaletune_id, dict(self.params)))


def _log_params(client: MlflowClient, run_id: str, params: Mapping[str, str]) -> None:
    from mlflow.entities import Param

    items = [Param(name, value) for name, value in params.items()]
    for start in range(0, len(items), PARAM_LIMIT):
        client.log_batch(run_id, params=items[start : start + PARAM_LIMIT])


@dataclass(frozen=True)
class LogParams(Operation):
    """A run's params. They wait with the reports, to go in one request with the first ones."""

    scaletune_id: str
    params: Mapping[str, str]
    description = "log params"
    lingers = True

    def apply(self, client: MlflowClient, sink: MlflowSink) -> None:
        run_id = find_run(client, sink, self.scaletune_id)
        if run_id is not None:
            _log_params(client, run_id, self.params)

    def merged(self, other: Operation) -> Operation | None:
        if (
            isinstance(other, LogMetrics)
            and other.scaletune_id == self.scaletune_id
            and not other.params
            and len(self.params) <= PARAM_LIMIT
        ):
            return LogMetrics(self.scaletune_id, other.points, self.params)
        return None


@dataclass(frozen=True)
class LogMetrics(Operation):
    """Reports of one run (and its params, the first time: one request for both)."""

    scaletune_id: str
    points: tuple[tuple[str, float, int, int], ...]  # name, value, time (ms), step
    params: Mapping[str, str] = field(default_factory=dict)  # at most PARAM_LIMIT
    description = "log metrics"
    lingers = True

    def apply(self, client: MlflowClient, sink: MlflowSink) -> None:
        from mlflow.entities import Metric, Param

        run_id = find_run(client, sink, self.scaletune_id)
        if run_id is None:
            return
        metrics = [Metric(name, value, ms, step) for name, value, ms, step in self.points]
        params = [Param(name, value) for name, value in self.params.items()]
        while metrics or params:  # a request takes BATCH_LIMIT entities, params included
            room = BATCH_LIMIT - len(params)
            client.log_batch(run_id, metrics=metrics[:room], params=params)
            metrics, params = metrics[room:], []

    def merged(self, other: Operation) -> Operation | None:
        if (
            isinstance(other, LogMetrics)
            and other.scaletune_id == self.scaletune_id
            and not other.params
            and len(self.points) + len(other.points) <= BATCH_LIMIT
        ):
            return LogMetrics(self.scaletune_id, self.points + other.points, self.params)
        return None


@dataclass(frozen=True)
class EndRun(Operation):
    scaletune_id: str
    status: str  # MLflow's: RUN_STATUS of the job's, or of how it ended
    end_ms: int
    tags: Mapping[str, str]
    model: Path | None = None
    algorithm: str | None = None
    description = "end a run"

    def apply(self, client: MlflowClient, sink: MlflowSink) -> None:
        from mlflow.entities import RunTag

        run_id = find_run(client, sink, self.scaletune_id)
        if run_id is None:
            return
        client.log_batch(run_id, tags=[RunTag(k, v) for k, v in self.tags.items()])
        if self.model is not None and self.model.is_dir():
            log_model(client, run_id, self.model, self.algorithm)
        if self.status == RUN_STATUS[JobStatus.PAUSED]:  # not ended: no end time
            client.update_run(run_id, status=self.status)
        else:
            client.set_terminated(run_id, self.status, end_time=self.end_ms)


@dataclass(frozen=True)
class SetTags(Operation):
    scaletune_id: str
    tags: Mapping[str, str] = field(default_factory=dict)
    description = "set tags"

    def apply(self, client: MlflowClient, sink: MlflowSink) -> None:
        from mlflow.entities import RunTag

        run_id = find_run(client, sink, self.scaletune_id)
        if run_id is not None:
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in self.tags.items()])


class MlflowJob:
    """A training job's tracker: its updates go through the sink of its tracking server."""

    def __init__(self, sink: MlflowSink, job: TrackedJob) -> None:
        self.sink, self.job = sink, job
        sink.submit(
            StartRun(
                job.id,
                run_name=job.id,
                start_ms=_ms(job.start_time),
                tags={
                    "scaletune.kind": "training",
                    "scaletune.algorithm": job.algorithm,
                    "scaletune.workers": str(job.instance_count),
                    "scaletune.backend": job.backend,
                    **(
                        {}
                        if job.tuning_job_id is None
                        else {
                            "scaletune.tuning_job_id": job.tuning_job_id,
                            "scaletune.trial": str(job.trial_number),
                        }
                    ),
                },
                params={
                    _param_name(name): _text(value) for name, value in job.hyperparameters.items()
                },
                parent_id=job.tuning_job_id,
                earlier=tuple(
                    (metric_name(p.name), p.value, _ms(p.time), p.step) for p in job.earlier_metrics
                ),
                new=job.new,
            )
        )

    def report(self, step: int, metrics: Mapping[str, float], time: float) -> None:
        ms = _ms(time)
        self.sink.submit(
            LogMetrics(
                self.job.id,
                tuple((metric_name(name), value, ms, step) for name, value in metrics.items()),
            )
        )

    def finish(self, end: JobEnd) -> None:
        tags = {
            "scaletune.status": end.status.value,
            "scaletune.billable_seconds": f"{end.billable_seconds:.3f}",
            "scaletune.wall_seconds": f"{end.wall_seconds:.3f}",
            "scaletune.attempts": str(end.attempts),
        }
        if end.failure_reason:
            tags["scaletune.reason"] = end.failure_reason[:_TEXT_LIMIT]
        if end.stopped_early:
            tags["scaletune.stopped_early"] = "true"
        self.sink.submit(
            EndRun(
                self.job.id,
                RUN_STATUS[JobStatus.COMPLETED if end.stopped_early else end.status],
                _ms(end.end_time),
                tags,
                end.model if end.status is JobStatus.COMPLETED else None,
                self.job.algorithm,
            )
        )


class MlflowTuning:
    """A tuning job's parent run; its trials' runs name it as their parent."""

    def __init__(self, sink: MlflowSink, tuning: TrackedTuning) -> None:
        self.sink, self.tuning = sink, tuning
        params = {name: _text(value) for name, value in tuning.settings.items()}
        params.update(
            {f"range.{_param_name(name)}": _text(dict(r)) for name, r in tuning.ranges.items()}
        )
        sink.submit(
            StartRun(
                tuning.id,
                run_name=tuning.id,
                start_ms=_ms(tuning.start_time),
                tags={
                    "scaletune.kind": "tuning",
                    "scaletune.strategy": tuning.strategy,
                    "scaletune.objective": f"{tuning.objective_type} {tuning.objective_metric}",
                },
                params=params,
            )
        )

    def finish(self, end: TuningEnd) -> None:
        tags = {"scaletune.status": end.status.value, "scaletune.trials": str(end.trials)}
        if end.best_job_id is not None:
            tags["scaletune.best_job_id"] = end.best_job_id
            self.sink.submit(SetTags(end.best_job_id, {"scaletune.best": "true"}))
        if end.best_objective is not None:
            tags["scaletune.best_objective"] = repr(end.best_objective)
        if end.best_objective is not None:  # beside its trials' runs, in MLflow's columns
            name = metric_name(self.tuning.objective_metric)
            best = ((name, end.best_objective, _ms(end.end_time), end.trials),)
            self.sink.submit(LogMetrics(self.tuning.id, best))
        self.sink.submit(EndRun(self.tuning.id, RUN_STATUS[end.status], _ms(end.end_time), tags))


def log_model(client: MlflowClient, run_id: str, folder: Path, algorithm: str | None) -> None:
    """The model under the run's `model` artifact, in its algorithm's MLflow flavour where it
    has one (`mlflow.xgboost.load_model("runs:/<id>/model")`), as its files otherwise (a
    user's script saves what it likes)."""
    from scaletune.algorithms import get_algorithm

    with tempfile.TemporaryDirectory(prefix="scaletune-mlflow-") as scratch:
        flavoured = Path(scratch) / "model"
        if algorithm is None or not get_algorithm(algorithm).save_mlflow_model(folder, flavoured):
            flavoured = folder
        client.log_artifacts(run_id, str(flavoured), artifact_path="model")


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _param_name(name: str) -> str:
    return metric_name(name)[:250]


def _text(value: object) -> str:
    return str(value)[:_TEXT_LIMIT]
