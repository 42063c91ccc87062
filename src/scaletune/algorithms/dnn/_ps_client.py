"""A worker's side of the parameter server: push a gradient, get the weights to compute the
next one on (`_parameter_server` is the server's side)."""

from __future__ import annotations

import os
import socket
import time
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

import torch
from torch import nn
from torch.nn.utils import vector_to_parameters

from ._ps_wire import Abort, Done, Hello, ParameterServerError, Push, Weights, no_delay

CONNECT_SECONDS = 120.0


class ParameterServerClient:
    """A worker's connection: push a gradient, get the weights to compute the next one on."""

    def __init__(
        self, host: str, port: int, authkey: bytes, rank: int, *, reply_timeout: float
    ) -> None:
        self._reply_timeout = reply_timeout
        self._socket = _connect(host, port)
        self._connection = Connection(os.dup(self._socket.fileno()))
        answer_challenge(self._connection, authkey)
        deliver_challenge(self._connection, authkey)
        self._connection.send(Hello(rank))
        self.version = 0

    def pull_initial(self, model: nn.Module) -> bool:
        return self._load(self._reply(), model)

    def push(
        self,
        model: nn.Module,
        loss_sum: float,
        examples: int,
        stop_wanted: bool,
        micro_sq: float = 0.0,
    ) -> bool:
        """Send this worker's gradient, load the weights that come back; True means stop."""
        gradient = torch.cat([_gradient_of(p).reshape(-1) for p in model.parameters()])
        push = Push(self.version, gradient.numpy(), loss_sum, examples, stop_wanted, micro_sq)
        self._connection.send(push)
        return self._load(self._reply(), model)

    def done(self) -> None:
        self._connection.send(Done())

    def close(self) -> None:
        self._connection.close()
        self._socket.close()

    def _reply(self) -> object:
        """The server's next message. A synchronous round waits for every worker: one that
        hangs (alive, so its heartbeats go on) would hold the others here for ever."""
        if not self._connection.poll(self._reply_timeout):
            raise ParameterServerError(
                f"collective timed out: no reply from the parameter server within "
                f"{self._reply_timeout:g} s"
            )
        return self._connection.recv()

    def _load(self, reply: object, model: nn.Module) -> bool:
        if isinstance(reply, Abort):
            raise ParameterServerError(reply.reason)
        if not isinstance(reply, Weights):
            raise ParameterServerError(f"unexpected reply {type(reply).__name__}")
        with torch.no_grad():
            vector_to_parameters(torch.from_numpy(reply.values), model.parameters())
        self.version = reply.version
        return reply.stop


def _gradient_of(parameter: nn.Parameter) -> torch.Tensor:
    return parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)


def _connect(host: str, port: int) -> socket.socket:
    """Rank 0 may start its server a little after the others start: retry until it listens."""
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=CONNECT_SECONDS)
            sock.settimeout(None)  # a synchronous round may wait long for a slow peer
            no_delay(sock)
            return sock
        except (ConnectionRefusedError, TimeoutError) as exc:
            if time.monotonic() > deadline:
                raise ParameterServerError(
                    f"cannot reach the parameter server at {host}:{port}: {exc}"
                ) from None
            time.sleep(0.05)
