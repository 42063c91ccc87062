"""scaletune: distributed training jobs and automatic model tuning that still converge.

Names are imported on first use, so that a user's training script can `import scaletune`
for `scaletune.report()` without loading the store, the tuner and their dependencies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaletune._lazy import lazy_names
from scaletune.reporting import StopRequest, checkpoint, report, stop_goes_on

if TYPE_CHECKING:
    from scaletune.api import Estimator, Session, TrainingJob, Tuner, TuningJob
    from scaletune.errors import (
        InvalidInputError,
        JobNotFoundError,
        ScaletuneError,
        StoreError,
    )
    from scaletune.spec import (
        CategoricalRange,
        ChannelSpec,
        ContinuousRange,
        IntegerRange,
        TrainingJobSpec,
        load_training_spec,
    )

__version__ = "0.1.0"

__getattr__ = lazy_names(__name__)

__all__ = [
    "CategoricalRange",
    "ChannelSpec",
    "ContinuousRange",
    "Estimator",
    "IntegerRange",
    "InvalidInputError",
    "JobNotFoundError",
    "ScaletuneError",
    "Session",
    "StopRequest",
    "StoreError",
    "TrainingJob",
    "TrainingJobSpec",
    "Tuner",
    "TuningJob",
    "__version__",
    "checkpoint",
    "load_training_spec",
    "report",
    "stop_goes_on",
]
