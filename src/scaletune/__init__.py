"""scaletune: distributed training jobs and automatic model tuning that still converge."""

from scaletune.api import Estimator, Session, TrainingJob
from scaletune.errors import InvalidInputError, JobNotFoundError, ScaletuneError, StoreError
from scaletune.spec import ChannelSpec, TrainingJobSpec, load_training_spec

__version__ = "0.1.0"

__all__ = [
    "ChannelSpec",
    "Estimator",
    "InvalidInputError",
    "JobNotFoundError",
    "ScaletuneError",
    "Session",
    "StoreError",
    "TrainingJob",
    "TrainingJobSpec",
    "__version__",
    "load_training_spec",
]
