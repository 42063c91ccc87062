"""What runs inside each worker process. Imports nothing of training, store or cli."""

from scaletune.worker._checkpointing import WorkerCheckpoints
from scaletune.worker._environment import (
    adopt_environment,
    inherited_environment,
    remember_environment,
)
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
from scaletune.worker._signals import (
    GOES_ON,
    JUDGED_FILE,
    ControllerSignals,
    FileSignals,
    write_whole,
)
from scaletune.worker._task import (
    ChannelShard,
    Rendezvous,
    RendezvousNeeds,
    WorkerContext,
    WorkerProgram,
    WorkerTask,
)

__all__ = [
    "GOES_ON",
    "JUDGED_FILE",
    "ChannelShard",
    "CheckpointSaved",
    "ControllerSignals",
    "Exited",
    "Failed",
    "FileSignals",
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
    "adopt_environment",
    "inherited_environment",
    "remember_environment",
    "write_whole",
]
