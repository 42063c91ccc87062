"""A job that begins from another job's checkpoint (`checkpoint.start_from`): the checkpoint
is copied into the new job's own folder, and the other job's reports up to it become the new
job's first reports, so its curve shows all the training its model went through."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scaletune.algorithms import Algorithm
from scaletune.checkpoints import Checkpoint, CheckpointError, CheckpointFolder
from scaletune.errors import CheckpointNotReadyError, InvalidInputError, JobNotFoundError
from scaletune.spec import StartFrom, TrainingJobSpec
from scaletune.store import MetricPoint, Store, TrainingJobRecord
from scaletune.training._attempt import (
    INHERITED_FROM,
    reported_step,
    reports_stored,
    resume_point,
)
from scaletune.training._paths import checkpoints_of, stored_location


@dataclass(frozen=True)
class Inheritance:
    """Another job's checkpoint, read whole, and its reports up to it."""

    job_id: str
    checkpoint: Checkpoint
    files: dict[str, bytes]
    metrics: list[MetricPoint]

    def recorded_in(self, spec: TrainingJobSpec) -> TrainingJobSpec:
        """The spec as the job records it: `start_from` with the step it took."""
        start = StartFrom(job=self.job_id, step=self.checkpoint.step)
        checkpoint = spec.checkpoint.model_copy(update={"start_from": start})
        return spec.model_copy(update={"checkpoint": checkpoint})

    @property
    def reported_step(self) -> int:
        saved = reported_step(self.checkpoint)
        return self.checkpoint.step if saved is None else saved


def read_inheritance(
    store: Store,
    jobs_dir: Path,
    spec: TrainingJobSpec,
    algorithm: Algorithm,
    start_from: StartFrom,
) -> Inheritance:
    """The checkpoint `start_from` names, checked and read; every problem is one line that
    names the value (nothing is written yet)."""
    where = "checkpoint.start_from"
    try:
        donor = store.get_training_job(start_from.job)
    except JobNotFoundError:
        raise InvalidInputError(f"{where}.job: there is no job {start_from.job!r}") from None
    if donor.algorithm != spec.algorithm:
        raise InvalidInputError(
            f"{where}.job: job {donor.id!r} ran {donor.algorithm!r}, this job runs "
            f"{spec.algorithm!r}"
        )
    if algorithm.checkpoints_per_worker and donor.instance_count != spec.instance_count:
        raise InvalidInputError(
            f"{where}.job: job {donor.id!r}'s checkpoint holds the state of each of its "
            f"{donor.instance_count} workers (its place in their shards); this job has "
            f"{spec.instance_count}"
        )
    stored = donor.spec_view  # read as stored: validated when it was written
    if not stored.enabled:
        raise InvalidInputError(f"{where}.job: job {donor.id!r} keeps no checkpoints")
    folder = CheckpointFolder(
        checkpoints_of(
            jobs_dir,
            donor.id,
            stored_location(stored.checkpoint_path),
            stored_location(stored.staging),
        )
    )
    reports = store.metrics(donor.id)
    stored_up_to = max((point.step for point in reports), default=None)
    try:
        if start_from.step is not None:
            checkpoint = folder.at(start_from.step)
            if not reports_stored(checkpoint, stored_up_to):
                raise CheckpointNotReadyError(
                    f"{where}.step: job {donor.id!r}'s reports up to its checkpoint at step "
                    f"{start_from.step} are not all stored yet"
                )
        else:
            # Its newest checkpoint whose reports are stored: the copy's curve has no gap.
            found = resume_point(folder, stored_up_to)
            if found is None:
                raise CheckpointNotReadyError(
                    f"{where}.job: job {donor.id!r} has no complete checkpoint yet"
                )
            checkpoint = found
        files = _load(folder, checkpoint, donor, newest=start_from.step is None)
    except CheckpointError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None
    saved = reported_step(checkpoint)
    up_to = checkpoint.step if saved is None else saved
    metrics = [point for point in reports if point.step <= up_to]
    return Inheritance(donor.id, checkpoint, files, metrics)


def _load(
    folder: CheckpointFolder, checkpoint: Checkpoint, donor: TrainingJobRecord, *, newest: bool
) -> dict[str, bytes]:
    """The checkpoint's files. A running job prunes its older checkpoints as it saves: its
    newest, found a moment ago, may be gone by the time it is read, for a newer one, which
    the next try finds (a PBT copy started as its donor goes on)."""
    try:
        return folder.load(checkpoint)
    except CheckpointError as exc:
        if newest and not donor.status.is_terminal:
            raise CheckpointNotReadyError(
                f"checkpoint.start_from.job: job {donor.id!r}'s checkpoint at step "
                f"{checkpoint.step} was replaced while it was read ({exc})"
            ) from None
        raise


def copy_checkpoint(inheritance: Inheritance, folder: CheckpointFolder) -> Checkpoint:
    """The inherited checkpoint, saved in this job's own folder under its step, marked as
    inherited (its reports are the other job's: it is usable before this job reports)."""
    checkpoint = inheritance.checkpoint
    meta = {
        **checkpoint.meta,
        "reported_step": inheritance.reported_step,
        INHERITED_FROM: inheritance.job_id,
    }
    try:
        return folder.save(checkpoint.step, inheritance.files, meta, saved_at=checkpoint.saved_at)
    except CheckpointError as exc:
        raise InvalidInputError(f"checkpoint.start_from: {exc}") from None
