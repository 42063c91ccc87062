"""What runs inside each worker process. Imports nothing of training, store or cli."""

from scaletune.worker._checkpointing import WorkerCheckpoints
from scaletune.worker._environment import inherited_environment, remember_environment
from scaletune.worker._messages import (
    CheckpointSaved,
    Exited,
    Failed,
    Finished,
    Heartbeat,
    LogOutput,
    Notice,
    Ready,
    Report,
    WorkerEvent,
)
from scaletune.worker._task import (
    GOES_ON,
    ChannelShard,
    Rendezvous,
    RendezvousNeeds,
    WorkerContext,
    WorkerProgram,
    WorkerTask,
)

__all__ = [
    "GOES_ON",
    "ChannelShard",
    "CheckpointSaved",
    "Exited",
    "Failed",
    "Finished",
    "Heartbeat",
    "LogOutput",
    "Notice",
    "Ready",
    "Rendezvous",
    "RendezvousNeeds",
    "Report",
    "WorkerCheckpoints",
    "WorkerContext",
    "WorkerEvent",
    "WorkerProgram",
    "WorkerTask",
    "inherited_environment",
    "remember_environment",
]
