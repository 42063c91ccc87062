"""Jobs, metrics and decisions: SQLite by default, PostgreSQL by URL."""

from scaletune.store._location import StoreLocation, default_home, resolve_store
from scaletune.store._records import (
    AttemptRecord,
    JobOutcome,
    JobStatus,
    MetricPoint,
    NewTrainingJob,
    NewTuningJob,
    RejectedMetric,
    TrainingJobRecord,
    TuningJobRecord,
)
from scaletune.store._schema import SCHEMA_VERSION
from scaletune.store._store import Store

__all__ = [
    "SCHEMA_VERSION",
    "AttemptRecord",
    "JobOutcome",
    "JobStatus",
    "MetricPoint",
    "NewTrainingJob",
    "NewTuningJob",
    "RejectedMetric",
    "Store",
    "StoreLocation",
    "TrainingJobRecord",
    "TuningJobRecord",
    "default_home",
    "resolve_store",
]
