"""Jobs, metrics and decisions: SQLite by default, PostgreSQL by URL.

Names load on first use: a command that needs `JobStatus` does not load SQLAlchemy."""

from typing import TYPE_CHECKING

from scaletune._lazy import lazy_names

if TYPE_CHECKING:
    from scaletune.store._browse import ChangeMark
    from scaletune.store._location import StoreLocation, default_home, resolve_store
    from scaletune.store._patience import (
        COMMAND_PATIENCE,
        CONTROLLER_PATIENCE,
        NO_WAIT,
        Patience,
    )
    from scaletune.store._queries import TrialOrder, TrialRow, TrialSortKey, TuningTotals
    from scaletune.store._records import (
        AttemptRecord,
        JobOutcome,
        JobStatus,
        MetricPoint,
        NewTrainingJob,
        NewTuningJob,
        RejectedMetric,
        Resize,
        TrainingJobRecord,
        TuningJobRecord,
        resizes,
    )
    from scaletune.store._schema import SCHEMA_VERSION
    from scaletune.store._store import Store
    from scaletune.store._stored_specs import (
        StoredConstraint,
        StoredHyperband,
        StoredObjective,
        StoredRange,
        StoredStart,
        StoredTrainingSpec,
        StoredTuningSpec,
    )

_WHERE = {
    "StoreLocation": "_location",
    "default_home": "_location",
    "resolve_store": "_location",
    "ChangeMark": "_browse",
    "COMMAND_PATIENCE": "_patience",
    "CONTROLLER_PATIENCE": "_patience",
    "NO_WAIT": "_patience",
    "Patience": "_patience",
    "TrialOrder": "_queries",
    "TrialRow": "_queries",
    "TrialSortKey": "_queries",
    "TuningTotals": "_queries",
    "AttemptRecord": "_records",
    "JobOutcome": "_records",
    "JobStatus": "_records",
    "MetricPoint": "_records",
    "NewTrainingJob": "_records",
    "NewTuningJob": "_records",
    "RejectedMetric": "_records",
    "Resize": "_records",
    "resizes": "_records",
    "TrainingJobRecord": "_records",
    "TuningJobRecord": "_records",
    "SCHEMA_VERSION": "_schema",
    "Store": "_store",
    "StoredConstraint": "_stored_specs",
    "StoredHyperband": "_stored_specs",
    "StoredObjective": "_stored_specs",
    "StoredRange": "_stored_specs",
    "StoredStart": "_stored_specs",
    "StoredTrainingSpec": "_stored_specs",
    "StoredTuningSpec": "_stored_specs",
}
__getattr__ = lazy_names(__name__, _WHERE)
__all__ = [
    "COMMAND_PATIENCE",
    "CONTROLLER_PATIENCE",
    "NO_WAIT",
    "SCHEMA_VERSION",
    "AttemptRecord",
    "ChangeMark",
    "JobOutcome",
    "JobStatus",
    "MetricPoint",
    "NewTrainingJob",
    "NewTuningJob",
    "Patience",
    "RejectedMetric",
    "Resize",
    "Store",
    "StoreLocation",
    "StoredConstraint",
    "StoredHyperband",
    "StoredObjective",
    "StoredRange",
    "StoredStart",
    "StoredTrainingSpec",
    "StoredTuningSpec",
    "TrainingJobRecord",
    "TrialOrder",
    "TrialRow",
    "TrialSortKey",
    "TuningJobRecord",
    "TuningTotals",
    "default_home",
    "resizes",
    "resolve_store",
]
