"""scaletune: distributed training jobs and automatic model tuning that still converge."""

from scaletune.api import Estimator, Session, TrainingJob, Tuner, TuningJob
from scaletune.errors import InvalidInputError, JobNotFoundError, ScaletuneError, StoreError
from scaletune.reporting import report
from scaletune.spec import (
    CategoricalRange,
    ChannelSpec,
    ContinuousRange,
    IntegerRange,
    TrainingJobSpec,
    load_training_spec,
)

__version__ = "0.1.0"

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
    "StoreError",
    "TrainingJob",
    "TrainingJobSpec",
    "Tuner",
    "TuningJob",
    "__version__",
    "load_training_spec",
    "report",
]
