"""Batch prediction (SageMaker's batch transform): a finished job's published model scores a
table, in this process or split over N workers of the session's backend, the rows coming
back in the input's order. Bad input is refused before anything runs.

Over several workers the rows, the model and the parts pass through the job's staging (its
`cluster.staging`, or one given), as a training job's data does: a shared folder or an
object-storage URL lets the workers run on other machines of a Ray cluster."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scaletune.algorithms import Algorithm, get_algorithm
from scaletune.algorithms._prediction import (
    INPUT_CHANNEL,
    PredictionSettings,
    predict_rows,
    read_part,
)
from scaletune.cluster import Backend, free_port
from scaletune.data import Table, TableFiles, get_folder, put_folder, read_csv_table
from scaletune.data._channels import prepare_builtin
from scaletune.data._table import FloatArray
from scaletune.errors import InvalidInputError, ScaletuneError
from scaletune.spec import BuiltinDataset, ChannelName, is_url
from scaletune.store import JobStatus, Store, TrainingJobRecord
from scaletune.training._paths import stored_location
from scaletune.training._staging import JobStaging, check_writable
from scaletune.worker import ChannelShard, Exited, Failed, Rendezvous, WorkerTask

SILENT_SECONDS = 60.0  # a prediction worker this long without a word has hung


@dataclass(frozen=True)
class Predictions:
    """One row per input row, in its order: a probability of the positive class, each
    class's, or a value; what scored them, and how long it took."""

    job_id: str
    values: FloatArray
    workers: int
    seconds: float

    @property
    def rows(self) -> int:
        return int(self.values.shape[0])

    def write_csv(self, path: Path) -> None:
        """The predictions as a CSV with a header: `prediction`, or `class_0`, `class_1`, ..."""
        values = self.values if self.values.ndim == 2 else self.values[:, None]
        header = (
            "prediction"
            if self.values.ndim == 1
            else ",".join(f"class_{index}" for index in range(values.shape[1]))
        )
        np.savetxt(path, values, delimiter=",", header=header, comments="", fmt="%.9g")


def read_input(data: str, dataset_file: Path | None = None) -> Table:
    """What to score: a CSV file, folder or URL in a channel's format, or a built-in dataset
    as `name` (its test split) or `name:split`."""
    name, _, split = data.partition(":")
    if name in {dataset.value for dataset in BuiltinDataset} and not Path(data).exists():
        tables = prepare_builtin(BuiltinDataset(name), dataset_file)
        chosen = split or ChannelName.TEST.value
        if chosen not in tables:
            raise InvalidInputError(f"--data {data!r}: {name} has splits {sorted(tables)}")
        return tables[chosen]
    if not is_url(data) and not Path(data).exists():
        raise InvalidInputError(
            f"--data {data!r}: no such file or folder, nor a built-in dataset "
            f"({', '.join(dataset.value for dataset in BuiltinDataset)})"
        )
    return read_csv_table(data if is_url(data) else Path(data))


@dataclass(frozen=True)
class PredictionPlan:
    """A prediction checked and ready to run: whose model, on what, on how many workers, and
    where those workers' rows, model and parts pass (None: a temp folder here)."""

    record: TrainingJobRecord
    algorithm: Algorithm
    table: Table
    instance_count: int
    staging: Path | str | None


class BatchPredictor:
    """Scores tables with the models of a store's finished jobs, on a backend's workers."""

    def __init__(self, store: Store, backend: Backend | None = None) -> None:
        """`backend`: where a prediction over several workers runs (none: one, here)."""
        self.store, self.backend = store, backend

    def predict(
        self,
        job_id: str,
        table: Table,
        *,
        instance_count: int = 1,
        staging: Path | str | None = None,
    ) -> Predictions:
        """`staging`: where the workers' rows, model and parts pass (a folder every node
        mounts, or a URL); by default the job's own `cluster.staging`, and without one the
        temp folder here (workers on this machine)."""
        return self.run(self.check(job_id, table, instance_count=instance_count, staging=staging))

    def check(
        self,
        job_id: str,
        table: Table,
        *,
        instance_count: int = 1,
        staging: Path | str | None = None,
    ) -> PredictionPlan:
        """Refuse bad input before any worker starts (one line naming it): the job, its
        model, the worker count, the staging."""
        record = self.store.get_training_job(job_id)
        algorithm = _predicting(record)
        if instance_count < 1 or instance_count > max(table.n_rows, 1):
            raise InvalidInputError(
                f"--instance-count {instance_count}: give 1 to {max(table.n_rows, 1)} "
                f"(the table has {table.n_rows} rows)"
            )
        location = staging if staging is not None else stored_location(record.spec_view.staging)
        if instance_count > 1:
            check_writable(location, "--staging")
        return PredictionPlan(record, algorithm, table, instance_count, location)

    def run(self, plan: PredictionPlan) -> Predictions:
        """A checked prediction, scored here or on this predictor's backend."""
        record, algorithm, workers = plan.record, plan.algorithm, plan.instance_count
        if workers > 1:
            if self.backend is None:
                raise InvalidInputError(f"instance_count={workers} needs a backend to run on")
            # The algorithm's program imports its library, which each worker's scoring needs:
            # the fork server imports it once, beside the model's copy and the staging.
            self.backend.warm_up([predict_rows, algorithm.program])
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="scaletune-predict-") as scratch:
            folder = Path(scratch)
            model_dir = _local_model(record, folder)
            features = _features(plan.table, algorithm.model_width(model_dir), record.id)
            if workers == 1:
                values = algorithm.predict(model_dir, features, os.cpu_count() or 1)
            else:
                job_staging = JobStaging.create(plan.staging, f"{record.id}-predict", folder)
                try:
                    values = self._on_workers(record, model_dir, features, workers, job_staging)
                finally:
                    job_staging.remove()
        return Predictions(record.id, values, workers, time.monotonic() - started)

    def _on_workers(
        self,
        record: TrainingJobRecord,
        model_dir: Path,
        features: FloatArray,
        workers: int,
        staging: JobStaging,
    ) -> FloatArray:
        assert self.backend is not None  # predict() refused this
        rows = Table(features, np.zeros(len(features), np.float32), "prediction input")
        shard = ChannelShard(TableFiles.write(rows, staging.staged("input")), sharded=True)
        output = staging.staged("output")
        if isinstance(output, Path):
            output.mkdir(parents=True)
        settings = PredictionSettings(
            algorithm=record.algorithm,
            model_dir=str(_staged_model(record, model_dir, staging)),
            output_dir=str(output),
        )
        backend, folder = self.backend, staging.scratch
        host = backend.rendezvous_host
        tasks = [
            WorkerTask(
                job_id=f"{record.id}-predict",
                rank=rank,
                world_size=workers,
                program=predict_rows,
                hyperparameters=settings,
                channels={INPUT_CHANNEL: shard},
                model_dir=folder / "unused",
                log_path=folder / f"worker-{rank}.log",
                rendezvous=Rendezvous(master_addr=host, master_port=free_port(host)),
                seed=0,
                scratch=folder,
            )
            for rank in range(workers)
        ]
        group = backend.launch(tasks)
        try:
            while not group.all_finished:
                failures = [_failure(event) for event in group.poll(0.1)]
                silent = group.silent_ranks(SILENT_SECONDS)
                failures += [f"worker {rank} went silent" for rank in silent]
                reasons = [reason for reason in failures if reason is not None]
                if reasons:
                    raise ScaletuneError(f"prediction with job {record.id!r} failed: {reasons[0]}")
        finally:
            group.release()  # finished workers go back warm; any other is killed
        return np.concatenate([read_part(str(output), rank) for rank in range(workers)])


def _predicting(record: TrainingJobRecord) -> Algorithm:
    algorithm = get_algorithm(record.algorithm)
    if not algorithm.predicts:
        raise InvalidInputError(
            f"job {record.id!r} ran algorithm {record.algorithm!r}: its model is whatever the "
            "script saved, which only the script can read"
        )
    if record.status is not JobStatus.COMPLETED or record.artifact is None:
        raise InvalidInputError(
            f"job {record.id!r} has no model to predict with: it is {record.status.value}"
        )
    return algorithm


def _local_model(record: TrainingJobRecord, scratch: Path) -> Path:
    """The job's published model folder, fetched here first when it lives at a URL."""
    artifact = record.artifact or ""
    if not is_url(artifact):
        if not Path(artifact).is_dir():
            raise InvalidInputError(f"job {record.id!r}'s model {artifact!r} is gone")
        return Path(artifact)
    local = scratch / "model"
    get_folder(artifact, local)
    return local


def _staged_model(record: TrainingJobRecord, model_dir: Path, staging: JobStaging) -> Path | str:
    """Where the workers read the model: its own URL if it was published at one, else a copy
    in a shared staging, else the folder here."""
    if record.artifact is not None and is_url(record.artifact):
        return record.artifact
    if not staging.shared:
        return model_dir
    staged = staging.staged("model")
    if isinstance(staged, str):
        put_folder(model_dir, staged)
    else:
        shutil.copytree(model_dir, staged)
    return staged


def _features(table: Table, width: int, job_id: str) -> FloatArray:
    """The table's feature columns for a model of `width`: a channel's rows (label first, then
    the features), or rows of the features alone, whose first column was read as a label."""
    if table.n_features == width:
        return table.features
    if table.n_features + 1 == width:
        return np.column_stack([table.labels, table.features]).astype(np.float32)
    raise InvalidInputError(
        f"--data has {table.n_features + 1} columns ({table.source}); job {job_id!r}'s model "
        f"takes {width} features: give its {width} columns, or a label and then them"
    )


def _failure(event: object) -> str | None:
    if isinstance(event, Failed):
        return f"worker {event.rank} failed: {event.error}"
    if isinstance(event, Exited):
        return f"worker {event.rank} exited unexpectedly (code {event.exitcode})"
    return None
