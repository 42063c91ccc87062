"""Serving the console: the socket is bound here first, so that a port in use is one clear
line before anything starts, and `--port 0` takes a free port and says which."""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

from scaletune.console._app import LOOPBACK_NAMES, create_app
from scaletune.console._security import Access, is_loopback
from scaletune.console._state import DEFAULT_MAX_STREAMS
from scaletune.errors import InvalidInputError
from scaletune.store import Store

DEFAULT_PORT = 8470  # not 8265 (Ray's dashboard), 8080 (optuna-dashboard) or 8888 (Jupyter)
SHUTDOWN_GRACE_SECONDS = 2  # open event streams end rather than hold the server up


@dataclass
class Console:
    """A console ready to serve: its bound socket, its app and the URL to open."""

    store: Store
    access: Access
    sock: socket.socket
    host: str
    allowed_hosts: list[str]
    max_live_pages: int = DEFAULT_MAX_STREAMS

    @property
    def port(self) -> int:
        port: int = self.sock.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        shown = f"[{shown}]" if ":" in shown else shown
        token = f"?token={self.access.token}" if self.access.token else ""
        return f"http://{shown}:{self.port}/{token}"

    def serve(self) -> None:
        import uvicorn

        app = create_app(
            self.store, self.access, self.allowed_hosts, max_streams=self.max_live_pages
        )
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
            server_header=False,
        )
        try:
            uvicorn.Server(config).run(sockets=[self.sock])
        finally:
            self.sock.close()
            self.store.close()


def open_console(
    store: Store,
    host: str,
    port: int,
    *,
    token: str | None = None,
    read_only: bool = False,
    allow_hosts: list[str] | None = None,
    max_live_pages: int = DEFAULT_MAX_STREAMS,
) -> Console:
    if not 0 <= port <= 65535:
        raise InvalidInputError(f"--port {port}: a port from 0 to 65535 (0: any free one)")
    access = Access.for_bind(host, token, read_only)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InvalidInputError(f"--host {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = (
            "is in use (--port picks another; 0: any free one)"
            if exc.errno == errno.EADDRINUSE
            else exc.strerror
        )
        raise InvalidInputError(f"--host {host} --port {port}: {why}") from None
    allowed = [*LOOPBACK_NAMES, *(allow_hosts or [])]
    if not is_loopback(host):
        # the names and addresses this machine is reached by (never "*": that would let a
        # rebound DNS name through), plus --allow-host for a proxy's name
        allowed += [host, socket.gethostname(), socket.getfqdn(), *_interface_addresses()]
    return Console(store, access, sock, host, allowed, max_live_pages)


def _interface_addresses() -> list[str]:
    import psutil

    found = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET:
                found.append(address.address)
            elif address.family == socket.AF_INET6:
                found.append(f"[{address.address.split('%')[0]}]")
    return found
