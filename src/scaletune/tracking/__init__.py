"""Where a job is recorded besides the store: MLflow runs and TensorBoard event files."""

from scaletune.tracking._events import (
    JobEnd,
    JobTracker,
    TrackedJob,
    TrackedTuning,
    TuningEnd,
    TuningTracker,
)
from scaletune.tracking._tracking import Trackers, Tracking

__all__ = [
    "JobEnd",
    "JobTracker",
    "TrackedJob",
    "TrackedTuning",
    "Trackers",
    "Tracking",
    "TuningEnd",
    "TuningTracker",
]
