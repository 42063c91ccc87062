"""Places worker groups and gives them what they need to find each other: local processes
(`LocalBackend`) or Ray actors (`RayBackend`, imported only when asked for)."""

from typing import TYPE_CHECKING, Any

from scaletune.cluster._backend import Abandon, Backend, Group
from scaletune.cluster._factory import make_backend
from scaletune.cluster._local import LocalBackend, WorkerGroup
from scaletune.cluster._rendezvous import GroupRendezvous, free_port
from scaletune.cluster._slots import SLOTS_VARIABLE, FixedSlots, Slots, SlotsFile, slots_from
from scaletune.cluster._starters import ForkServer, FreshInterpreters, WorkerStarter

if TYPE_CHECKING:
    from scaletune.cluster._ray import RayBackend, WorkerResources

__all__ = [
    "SLOTS_VARIABLE",
    "Abandon",
    "Backend",
    "FixedSlots",
    "ForkServer",
    "FreshInterpreters",
    "Group",
    "GroupRendezvous",
    "LocalBackend",
    "RayBackend",
    "Slots",
    "SlotsFile",
    "WorkerGroup",
    "WorkerResources",
    "WorkerStarter",
    "free_port",
    "make_backend",
    "slots_from",
]


def __getattr__(name: str) -> Any:
    if name in ("RayBackend", "WorkerResources"):
        from scaletune.cluster import _ray

        return getattr(_ray, name)
    raise AttributeError(name)
