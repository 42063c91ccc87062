"""A real MLflow tracking server (SQLite behind it, artifacts served through it) on
127.0.0.1 for the module's tests, and a TCP relay in front of it that a test can cut."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import suppress

import pytest
from benchmarks import _mlflow_server as mlflow_servers

from scaletune.cluster import free_port
from tests.conftest import allow_process_tree


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server, url = mlflow_servers.start(tmp_path_factory.mktemp("mlflow-server"))
    try:
        with allow_process_tree({server.pid}):
            yield url
    finally:
        mlflow_servers.stop(server)


class Relay:
    """Forwards 127.0.0.1:port to the server; `cut()` makes the server unreachable (every
    connection closed, new ones refused) until `restore()`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()  # below the ephemeral range: still free when a cut ends
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.restore()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        self._spawn(self._accept, listener)

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            connections, self._connections = self._connections, []
        if listener is not None:
            with suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()
        for thread in self._threads:
            thread.join(5)
        self._threads = []

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._connections += [client, upstream]
            self._spawn(self._pipe, client, upstream)
            self._spawn(self._pipe, upstream, client)

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def relay(mlflow_server: str) -> Iterator[Relay]:
    host, port = mlflow_server.removeprefix("http://").split(":")
    opened = Relay((host, int(port)))
    yield opened
    opened.cut()
