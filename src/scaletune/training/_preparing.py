"""A job made ready to run: every input loaded and checked before anything is written, then
its record written (a new job, Pending) or reopened (a job resumed)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from scaletune.algorithms import get_algorithm
from scaletune.checkpoints import CheckpointFolder
from scaletune.clock import Clock
from scaletune.data import PreparedDatasets, load_channels
from scaletune.errors import InvalidInputError
from scaletune.spec import (
    BackendName,
    CapacityPlan,
    TrainingJobSpec,
    describe_validation_error,
)
from scaletune.store import JobStatus, NewTrainingJob, Store
from scaletune.tracking import Tracking
from scaletune.training._attempt import last_reported_step, reported_step, resume_point
from scaletune.training._ids import new_job_id
from scaletune.training._inherit import copy_checkpoint, read_inheritance
from scaletune.training._paths import JobPaths
from scaletune.training._prepared import PreparedJob
from scaletune.training._report_writer import replay
from scaletune.training._staging import check_writable
from scaletune.worker import WorkerProgram


class JobPreparer:
    def __init__(
        self,
        store: Store,
        backend: BackendName,
        jobs_dir: Path,
        clock: Clock,
        tracking: Tracking,
        *,
        warm_up: Callable[[Sequence[WorkerProgram]], None],
    ) -> None:
        """`warm_up`: the backend's (`Backend.warm_up`), given the job's program once its spec
        has passed its checks, before its data loads."""
        self._store, self._backend, self._jobs_dir = store, backend, jobs_dir
        self._clock, self._tracking = clock, tracking
        self._warm_up = warm_up
        self._datasets = PreparedDatasets()  # built-in datasets, prepared once for all jobs

    def prepare(
        self,
        spec: TrainingJobSpec,
        *,
        job_id: str | None = None,
        tuning_job_id: str | None = None,
        trial_number: int | None = None,
    ) -> PreparedJob:
        """Load and check every input; only then write the job (Pending) to the store."""
        now = self._clock.time()
        job = self._loaded(
            job_id or new_job_id(spec.name or spec.algorithm, now),
            spec,
            wrong_backend=(
                f"cluster.backend={spec.cluster.backend.value!r}, but this session places "
                f"workers with the {self._backend.value!r} backend (CLI: --backend "
                f"{spec.cluster.backend.value}; Python: Session(backend=...))"
            ),
        )
        start_from = spec.checkpoint.start_from
        inheritance = (
            None
            if start_from is None
            else read_inheritance(self._store, self._jobs_dir, spec, job.algorithm, start_from)
        )
        if inheritance is not None:
            assert job.checkpoints is not None  # start_from needs checkpoints enabled
            job = dataclasses.replace(
                job,
                spec=inheritance.recorded_in(spec),  # the step it took, if it took the newest
                starts_from=copy_checkpoint(inheritance, job.checkpoints),
            )
        self._store.create_training_job(
            new_job_record(
                job.spec,
                job.id,
                created_at=now,
                log_dir=str(job.paths.logs),
                tuning_job_id=tuning_job_id,
                trial_number=trial_number,
            ),
            [] if inheritance is None else inheritance.metrics,
        )
        return job

    def prepare_resume(self, job_id: str, *, capacity: CapacityPlan | None = None) -> PreparedJob:
        """A Stopped, Failed or Paused job, ready to run again from its latest checkpoint (a
        new attempt under the same id), on `capacity` if given (a trial promoted off spot).
        Its inputs are loaded and checked again."""
        record = self._store.get_training_job(job_id)
        if record.status not in (JobStatus.STOPPED, JobStatus.FAILED, JobStatus.PAUSED):
            raise InvalidInputError(
                f"job {job_id!r} is {record.status.value}: only a Stopped, Failed or Paused "
                "job resumes"
            )
        try:
            spec = TrainingJobSpec.model_validate(record.spec)
        except ValidationError as exc:  # its data moved since, say
            raise InvalidInputError(
                f"job {job_id!r} cannot resume: {describe_validation_error(exc)}"
            ) from None
        if capacity is not None:
            spec = spec.model_copy(
                update={"cluster": spec.cluster.model_copy(update={"capacity": capacity})}
            )
        job = self._loaded(
            job_id,
            spec,
            wrong_backend=(
                f"job {job_id!r} ran on the {spec.cluster.backend.value!r} backend; resume it "
                f"with --backend {spec.cluster.backend.value}"
            ),
        )
        self._store.reopen_training_job(job_id)  # last: nothing changes if a check failed
        replay(self._store, job_id, job.paths.unsent_reports)  # what an outage left unwritten
        # Now, not when it starts: a tuning job rebuilds its scheduler from these reports.
        reached = last_reported_step(self._store, job_id)
        resume = None if job.checkpoints is None else resume_point(job.checkpoints, reached)
        self._store.discard_metrics_after(job_id, None if resume is None else reported_step(resume))
        return dataclasses.replace(job, reached_step=reached, starts_from=resume)

    def _loaded(self, job_id: str, spec: TrainingJobSpec, wrong_backend: str) -> PreparedJob:
        """What a new job and a resumed one both check and load before anything is written:
        the backend it runs on, its tracking, its algorithm's checks (a trial's spec is
        built, not loaded, so they run here too), its data prepared, its hyperparameters as
        the data completed them, and that its staging and checkpoints can be written."""
        if spec.cluster.backend is not self._backend:
            raise InvalidInputError(wrong_backend)
        self._tracking.check(spec.tracking)
        algorithm = get_algorithm(spec.algorithm)
        algorithm.check_inputs(spec)
        hyperparameters = algorithm.parse_hyperparameters(spec.hyperparameters)
        algorithm.check_job(spec, hyperparameters)
        self._warm_up([algorithm.program])
        data = algorithm.prepare_data(hyperparameters, load_channels(spec, self._datasets))
        check_writable(spec.cluster.staging, "cluster.staging")
        if spec.checkpoint.enabled:
            check_writable(spec.checkpoint.path, "checkpoint.path")
        paths = JobPaths.for_job(self._jobs_dir, job_id, spec)
        return PreparedJob(
            job_id,
            spec,
            algorithm,
            data.hyperparameters or hyperparameters,
            data,
            paths,
            CheckpointFolder(paths.checkpoints) if spec.checkpoint.enabled else None,
        )


def new_job_record(
    spec: TrainingJobSpec,
    job_id: str,
    *,
    created_at: float,
    log_dir: str,
    tuning_job_id: str | None = None,
    trial_number: int | None = None,
) -> NewTrainingJob:
    """The record a job starts with (Pending), as the store keeps it."""
    return NewTrainingJob(
        id=job_id,
        name=spec.name,
        algorithm=spec.algorithm,
        spec=spec.model_dump(mode="json"),
        hyperparameters=dict(spec.hyperparameters),
        instance_count=spec.instance_count,
        created_at=created_at,
        log_dir=log_dir,
        tuning_job_id=tuning_job_id,
        trial_number=trial_number,
    )
