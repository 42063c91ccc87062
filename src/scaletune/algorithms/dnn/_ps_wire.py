"""What a parameter server and its workers send each other: plain dataclasses, pickled by
multiprocessing's framed connections over authenticated sockets."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from scaletune.errors import ScaletuneError

from ._ps_updates import FloatVector


class ParameterServerError(ScaletuneError):
    """The server or one of its workers went away; the job fails with this reason."""


# Messages. Plain dataclasses, pickled by multiprocessing's framed connections.
@dataclass(frozen=True)
class Hello:
    rank: int


@dataclass(frozen=True)
class Push:
    version: int  # of the weights this gradient was computed on
    gradient: FloatVector
    loss_sum: float
    examples: int
    stop_wanted: bool
    micro_sq: float = 0.0  # its micro-batch gradients' squared norms, summed (AdaScale)


@dataclass(frozen=True)
class Done:
    pass


@dataclass(frozen=True)
class Weights:
    version: int
    values: FloatVector
    stop: bool


@dataclass(frozen=True)
class Abort:
    reason: str


def no_delay(sock: socket.socket) -> None:
    """Small request-reply messages: without this, Nagle and delayed ACKs add ~40 ms each."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
