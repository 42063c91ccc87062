"""What runs inside each worker process. Imports nothing of training, store or cli."""

from scaletune.worker._messages import (
    Exited,
    Failed,
    Finished,
    LogOutput,
    Ready,
    Report,
    WorkerEvent,
)
from scaletune.worker._task import (
    ChannelShard,
    Rendezvous,
    WorkerContext,
    WorkerProgram,
    WorkerTask,
)

__all__ = [
    "ChannelShard",
    "Exited",
    "Failed",
    "Finished",
    "LogOutput",
    "Ready",
    "Rendezvous",
    "Report",
    "WorkerContext",
    "WorkerEvent",
    "WorkerProgram",
    "WorkerTask",
]
