"""A parameter server in this process, and its clients, for tests that pin every push."""

from __future__ import annotations

import torch
from torch import nn

from scaletune.algorithms.dnn._parameter_server import ParameterServer
from scaletune.algorithms.dnn._ps_client import ParameterServerClient
from scaletune.algorithms.dnn._ps_modes import ServerMode
from scaletune.algorithms.dnn._ps_updates import ServerUpdates
from scaletune.cluster import free_port

AUTHKEY = b"test"


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(2, 1, bias=False)


def start_server(
    model: nn.Module,
    updates: ServerUpdates,
    world_size: int,
    mode: ServerMode,
    straggler_seconds: float = 60.0,
) -> ParameterServer:
    return ParameterServer(
        model,
        updates,
        world_size=world_size,
        mode=mode,
        host="127.0.0.1",
        port=free_port(),
        authkey=AUTHKEY,
        straggler_seconds=straggler_seconds,
    )


def connect(
    server: ParameterServer, rank: int, opened: list[ParameterServerClient]
) -> tuple[ParameterServerClient, nn.Module]:
    """A worker's client (closed by the `clients` fixture) and its model, on version 0."""
    client = ParameterServerClient("127.0.0.1", server.port, AUTHKEY, rank, reply_timeout=60)
    opened.append(client)
    model = tiny_model()
    client.pull_initial(model)
    return client, model


def finish(server: ParameterServer, *clients: ParameterServerClient) -> None:
    for client in clients:
        client.done()
    server.wait_until_all_done()
