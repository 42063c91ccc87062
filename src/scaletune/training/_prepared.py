"""A training job ready to run: its checked inputs, and its record written (Pending). Below the
controller and its attempts, which both take it."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from scaletune.algorithms import Algorithm, PreparedData
from scaletune.checkpoints import Checkpoint, CheckpointFolder
from scaletune.spec import TrainingJobSpec
from scaletune.training._paths import JobPaths


@dataclass(frozen=True)
class PreparedJob:
    """A job whose inputs were checked and whose record exists (status Pending)."""

    id: str
    spec: TrainingJobSpec
    algorithm: Algorithm
    hyperparameters: BaseModel
    data: PreparedData
    paths: JobPaths
    checkpoints: CheckpointFolder | None  # None: the job keeps none ([checkpoint] enabled=false)
    reached_step: int | None = None  # resumed: the last step reported before, for steps redone
    # Where the first attempt starts: checkpoint.start_from, copied (a new job), or the newest
    # usable checkpoint of a job resumed before any attempt began (a PBT copy whose tuning
    # controller died between creating it, inherited reports and all, and starting it).
    starts_from: Checkpoint | None = None
    # Workers that may train at once on a machine, this job's among them (a tuning job's
    # parallel trials); None: this job's alone. Its workers share the cores accordingly.
    concurrent_workers: int | None = None
    # A tuning trial's rungs: its workers wait at each of these steps' reports until the
    # tuner's verdict is in (WorkerTask.judged_steps).
    judged_steps: frozenset[int] = frozenset()
