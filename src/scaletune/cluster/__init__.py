"""Places worker groups and gives them what they need to find each other."""

from scaletune.cluster._local import LocalBackend, WorkerGroup
from scaletune.cluster._rendezvous import GroupRendezvous, free_port

__all__ = ["GroupRendezvous", "LocalBackend", "WorkerGroup", "free_port"]
