"""The fork server's process: `python -m scaletune.cluster._zygote REQUESTS NOTICES` (two fds).

It does the workers' imports once, then forks a worker for each request: the request carries
the worker's end of its socketpair with the controller (SCM_RIGHTS) and the modules its
program needs, which the zygote imports first if it has not yet (so a job's second worker,
and the next job of its kind, start with them: torch for the DNN); the reply is the new
worker's pid. It reaps its workers and tells the controller each one's exit code. Its own
work is one thread, and it runs nothing but imports before forking: no thread pool has run work
(OpenBLAS starts idle threads at numpy's import and shuts them down at a fork, its own
handler's doing; torch's pool starts at its first operation) and no CUDA context exists, so a
forked worker starts as clean as a fresh interpreter that did the same imports. It ends
when its controller does (its requests socket closes), and its workers follow it (they watch
their parent). Nothing imports this module.
"""

import contextlib
import importlib
import os
import select
import signal
import socket
import sys
from multiprocessing.connection import Connection

from scaletune.cluster._process import serve
from scaletune.cluster._starters import PID, REQUEST_HEADER
from scaletune.worker import Ready, remember_environment


def main(requests: socket.socket, notices: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the controller decides what Ctrl-C ends
    remember_environment()  # before the preloaded modules change it (the workers inherit it)
    sys_path, preload = notices.recv()
    sys.path[:] = list(sys_path)
    for module in preload:
        importlib.import_module(module)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select (the wakeup fd)
    notices.send(Ready(os.getpid()))
    while True:
        readable, _, _ = select.select([requests.fileno(), wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 512)
            _reap(notices)
        if requests.fileno() in readable:
            request = _next_request(requests)
            if request is None:  # the controller is gone
                return
            fd, modules = request
            _import(modules)
            pid = os.fork()
            if pid == 0:
                _become_worker(fd, requests, notices, (wake_read, wake_write))
            os.close(fd)
            requests.sendall(PID.pack(pid))


def _next_request(requests: socket.socket) -> tuple[int, list[str]] | None:
    """A request's worker socket and module names; None once the controller is gone."""
    header, fds, _, _ = socket.recv_fds(requests, REQUEST_HEADER.size, 1)
    header += _read(requests, REQUEST_HEADER.size - len(header)) if header else b""
    if len(header) < REQUEST_HEADER.size:
        return None
    (length,) = REQUEST_HEADER.unpack(header)
    names = _read(requests, length)
    return (fds[0], names.decode().split()) if len(names) == length else None


def _read(requests: socket.socket, size: int) -> bytes:
    """`size` bytes, or fewer if the controller is gone."""
    data = b""
    while len(data) < size:
        chunk = requests.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _import(modules: list[str]) -> None:
    """What the worker would import itself; a module that fails to import is left for the
    worker, whose task then fails with the error where the controller sees it."""
    for module in modules:
        if module not in sys.modules:
            with contextlib.suppress(Exception):
                importlib.import_module(module)


def _reap(notices: Connection) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        with contextlib.suppress(OSError):
            notices.send((pid, os.waitstatus_to_exitcode(status)))


def _become_worker(
    fd: int, requests: socket.socket, notices: Connection, wake: tuple[int, int]
) -> None:
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        requests.close()
        notices.close()
        for end in wake:
            os.close(end)
        serve(Connection(fd), os.getppid())
        code = 0
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    main(socket.socket(fileno=int(sys.argv[1])), Connection(int(sys.argv[2])))
