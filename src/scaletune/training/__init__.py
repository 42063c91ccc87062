"""A training job's life, from spec to finished record.

Names load on first use: `reconcile_orphan` (for listing jobs) does not load the controller,
the cluster backends and the data loaders."""

from typing import TYPE_CHECKING

from scaletune._lazy import lazy_names

if TYPE_CHECKING:
    from scaletune.training._controller import TrainingController
    from scaletune.training._orphans import (
        controller_alive,
        process_alive,
        reconcile_orphan,
        remove_scratch,
        staging_of,
    )
    from scaletune.training._paths import JobPaths
    from scaletune.training._predict import BatchPredictor, Predictions, read_input
    from scaletune.training._prepared import PreparedJob
    from scaletune.training._preparing import new_job_record
    from scaletune.training._stopper import Stopper
    from scaletune.training._stopping import StopRequest, request_job_stop, request_tuning_stop

__getattr__ = lazy_names(__name__)
__all__ = [
    "BatchPredictor",
    "JobPaths",
    "Predictions",
    "PreparedJob",
    "StopRequest",
    "Stopper",
    "TrainingController",
    "controller_alive",
    "new_job_record",
    "process_alive",
    "read_input",
    "reconcile_orphan",
    "remove_scratch",
    "request_job_stop",
    "request_tuning_stop",
    "staging_of",
]
