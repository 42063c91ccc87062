"""A training job's life, from spec to finished record."""

from scaletune.training._controller import PreparedJob, TrainingController
from scaletune.training._orphans import controller_alive, reconcile_orphan
from scaletune.training._paths import JobPaths

__all__ = ["JobPaths", "PreparedJob", "TrainingController", "controller_alive", "reconcile_orphan"]
