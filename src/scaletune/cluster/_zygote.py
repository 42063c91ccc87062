"""The fork server's process: `python -m scaletune.cluster._zygote REQUESTS NOTICES` (two fds).

It does the workers' imports once, then forks a worker for each request: the request carries
the worker's end of its socketpair with the controller (SCM_RIGHTS), the reply is the new
worker's pid. It reaps its workers and tells the controller each one's exit code. It is
single-threaded and runs nothing but imports before forking: no thread pool (OpenMP, BLAS,
torch's) has started and no CUDA context exists, so a forked worker starts as clean as a
fresh interpreter that did the same imports. It ends when its controller does (its
requests socket closes), and its workers follow it (they watch their parent). Nothing
imports this module.
"""

import contextlib
import importlib
import os
import select
import signal
import socket
import struct
import sys
from multiprocessing.connection import Connection

from scaletune.cluster._process import serve
from scaletune.worker import Ready, remember_environment

PID = struct.Struct("q")


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
            message, fds, _, _ = socket.recv_fds(requests, 1, 1)
            if not message:  # the controller is gone
                return
            pid = os.fork()
            if pid == 0:
                _become_worker(fds[0], requests, notices, (wake_read, wake_write))
            os.close(fds[0])
            requests.sendall(PID.pack(pid))


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
