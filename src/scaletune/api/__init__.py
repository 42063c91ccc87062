"""The Python interface: Session, Estimator, Tuner and the handles on their jobs."""

from scaletune.api._estimator import ChannelInput, Estimator
from scaletune.api._job import TrainingJob
from scaletune.api._session import Session
from scaletune.api._tuner import Tuner, TuningJob, TuningJobAnalytics

__all__ = [
    "ChannelInput",
    "Estimator",
    "Session",
    "TrainingJob",
    "Tuner",
    "TuningJob",
    "TuningJobAnalytics",
]
