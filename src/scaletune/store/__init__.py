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
        NoticeRecord,
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

__getattr__ = lazy_names(__name__)
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
    "NoticeRecord",
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
