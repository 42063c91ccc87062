"""How the local backend starts a worker process: a fresh interpreter, or a fork of a process
that has already done the workers' imports (`_zygote`), which starts one in milliseconds.

Either way the controller gets a process handle (what `subprocess.Popen` offers: pid, poll,
wait, signals) and its end of a socketpair, over which the worker then says it is Ready.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Protocol

from scaletune.errors import WorkerStartError
from scaletune.worker import Ready

# The fork server's wire format, both ends (`_zygote` reads and writes the same): a request is
# its header, the length of the module names that follow, with the worker's socket attached;
# the reply is the new worker's pid.
REQUEST_HEADER = struct.Struct("I")
PID = struct.Struct("q")
_ORPHAN_CHECK_SECONDS = 0.05


class WorkerProcess(Protocol):
    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class WorkerStarter(Protocol):
    def prepare(self, preload: tuple[str, ...]) -> None:
        """Begin whatever makes the first worker start sooner, without waiting for it."""
        ...

    def open(self, preload: tuple[str, ...], timeout: float) -> tuple[WorkerProcess, Connection]:
        """A new worker process and the controller's end of its connection; `preload`: the
        modules it will import (the backend's, and its job's program's)."""
        ...

    @property
    def server_pids(self) -> list[int]:
        """Processes it keeps to start workers from."""
        ...

    def close(self) -> None: ...


class FreshInterpreters:
    """`python -m scaletune.cluster._entry`: a Python start and the imports for each worker."""

    def prepare(self, preload: tuple[str, ...]) -> None:
        pass

    def open(self, preload: tuple[str, ...], timeout: float) -> tuple[WorkerProcess, Connection]:
        ours, theirs = socket.socketpair()
        with theirs:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "scaletune.cluster._entry",
                    str(theirs.fileno()),
                    str(os.getpid()),
                ],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        return process, Connection(ours.detach())

    @property
    def server_pids(self) -> list[int]:
        return []

    def close(self) -> None:
        pass


class ForkServer:
    """Workers forked from one zygote per backend, started when the backend is made (its
    imports overlap the controller's own preparation) and again if it dies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._zygote: _Zygote | None = None

    def prepare(self, preload: tuple[str, ...]) -> None:
        with self._lock:
            if self._zygote is None:
                self._zygote = _Zygote(preload)

    def open(self, preload: tuple[str, ...], timeout: float) -> tuple[WorkerProcess, Connection]:
        with self._lock:
            if self._zygote is None or not self._zygote.alive():
                if self._zygote is not None:
                    self._zygote.close()
                self._zygote = _Zygote(preload)
            self._zygote.wait_ready(timeout)
            return self._zygote.fork(preload)

    @property
    def server_pids(self) -> list[int]:
        with self._lock:
            return [] if self._zygote is None else [self._zygote.process.pid]

    def close(self) -> None:
        with self._lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()


class _Zygote:
    def __init__(self, preload: tuple[str, ...]) -> None:
        self._requests, their_requests = socket.socketpair()
        notices, their_notices = socket.socketpair()
        with their_requests, their_notices:
            fds = (their_requests.fileno(), their_notices.fileno())
            self.process = subprocess.Popen(
                [sys.executable, "-m", "scaletune.cluster._zygote", *map(str, fds)],
                pass_fds=fds,
                stdin=subprocess.DEVNULL,
            )
        self._notices = Connection(notices.detach())
        self._exits: dict[int, int] = {}
        self._changed = threading.Condition()
        self._ready = False
        self._ended = False
        try:
            self._notices.send((list(sys.path), preload))
        except OSError as exc:
            self.close()
            raise WorkerStartError(f"the fork server died while starting: {exc}") from None

    def wait_ready(self, timeout: float) -> None:
        """Until it has done its imports (at once after the first time)."""
        if self._ready:
            return
        try:
            if not self._notices.poll(timeout):
                raise WorkerStartError(f"the fork server did not start within {timeout:.0f} s")
            ready = self._notices.recv()
        except (EOFError, OSError) as exc:
            self.close()
            raise WorkerStartError(f"the fork server died while starting: {exc}") from None
        except BaseException:
            self.close()
            raise
        if not isinstance(ready, Ready):
            self.close()
            raise WorkerStartError(f"the fork server started with {ready!r} instead of Ready")
        self._ready = True
        threading.Thread(target=self._read_exits, name="scaletune-zygote", daemon=True).start()

    def alive(self) -> bool:
        return self.process.poll() is None and not self._ended

    def fork(self, modules: tuple[str, ...]) -> tuple[WorkerProcess, Connection]:
        """A worker forked once the zygote has imported `modules` (at once if it has)."""
        names = " ".join(modules).encode()
        request = REQUEST_HEADER.pack(len(names)) + names
        ours, theirs = socket.socketpair()
        try:
            with theirs:
                sent = socket.send_fds(self._requests, [request], [theirs.fileno()])
                self._requests.sendall(request[sent:])
            reply = b""
            while len(reply) < PID.size:
                chunk = self._requests.recv(PID.size - len(reply))
                if not chunk:
                    raise WorkerStartError("the fork server ended while forking a worker")
                reply += chunk
        except OSError as exc:
            ours.close()
            raise WorkerStartError(f"the fork server cannot fork a worker: {exc}") from None
        (pid,) = PID.unpack(reply)
        return ForkedProcess(pid, self), Connection(ours.detach())

    def _read_exits(self) -> None:
        while True:
            try:
                pid, code = self._notices.recv()
            except (EOFError, OSError):
                break
            with self._changed:
                self._exits[pid] = code
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def exit_code(self, pid: int) -> int | None:
        with self._changed:
            if pid in self._exits:
                return self._exits[pid]
            if not self._ended:
                return None
        # The zygote is gone: its workers end within a parent check (they watch it), and
        # whoever adopted them reaps them; 1 is what the parent watch exits with.
        return None if _exists(pid) else 1

    def wait(self, pid: int, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while pid not in self._exits and not self._ended:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise subprocess.TimeoutExpired(f"worker {pid}", timeout or 0.0)
                self._changed.wait(remaining)
        while (code := self.exit_code(pid)) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker {pid}", timeout or 0.0)
            time.sleep(_ORPHAN_CHECK_SECONDS)
        return code

    def close(self) -> None:
        """Closing the requests socket ends the zygote (and, through their parent watch, any
        worker it still has); one still importing is killed."""
        with contextlib.suppress(OSError):
            self._requests.close()
        try:
            if not self._ready:  # still importing: nothing of it is worth waiting for
                raise subprocess.TimeoutExpired("fork server", 0)
            self.process.wait(2.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            self._notices.close()


class ForkedProcess:
    """A worker forked by the zygote: not this process's child, so its exit code comes from
    the zygote, and a signal is sent only while it is known to run (its pid is not reused)."""

    def __init__(self, pid: int, zygote: _Zygote) -> None:
        self._pid = pid
        self._zygote = zygote

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._zygote.exit_code(self._pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self._zygote.wait(self._pid, timeout)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def default_starter() -> WorkerStarter:
    """The fork server where processes fork (Linux, macOS), unless SCALETUNE_FORK_SERVER=0."""
    if os.environ.get("SCALETUNE_FORK_SERVER", "1") == "0" or not hasattr(os, "fork"):
        return FreshInterpreters()
    return ForkServer()
