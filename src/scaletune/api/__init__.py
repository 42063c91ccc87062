"""The Python interface: Session, Estimator and TrainingJob."""

from scaletune.api._estimator import ChannelInput, Estimator
from scaletune.api._job import TrainingJob
from scaletune.api._session import Session

__all__ = ["ChannelInput", "Estimator", "Session", "TrainingJob"]
