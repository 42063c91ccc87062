"""A training job's life, from spec to finished record."""

from scaletune.training._controller import PreparedJob, TrainingController, new_job_record
from scaletune.training._orphans import (
    controller_alive,
    process_alive,
    reconcile_orphan,
    remove_scratch,
    staging_of,
)
from scaletune.training._paths import JobPaths
from scaletune.training._stopper import Stopper

__all__ = [
    "JobPaths",
    "PreparedJob",
    "Stopper",
    "TrainingController",
    "controller_alive",
    "new_job_record",
    "process_alive",
    "reconcile_orphan",
    "remove_scratch",
    "staging_of",
]
