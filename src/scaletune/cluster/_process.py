"""The main loop of one worker process: import once, then run task after task (the warm pool).
Started through `python -m scaletune.cluster._entry` (see there)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import pickle
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path

from scaletune.data import put_folder
from scaletune.worker import (
    ControllerSignals,
    Failed,
    Finished,
    Heartbeat,
    Notice,
    Ready,
    WorkerContext,
    WorkerEvent,
    WorkerTask,
    adopt_environment,
    remember_environment,
)

PARENT_CHECK_SECONDS = 0.5
HEARTBEAT_SECONDS = 1.0  # well inside any heartbeat timeout a job may set (>= 3 s sensible)


def serve(conn: Connection, parent_pid: int) -> None:
    # Ctrl-C reaches the whole process group; the controller decides what happens to workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Before any thread starts, so that every thread (OpenMP's, gloo's) inherits the mask.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    _exit_with_parent(parent_pid)
    remember_environment()  # before the preloaded modules change it
    sys_path, preload = conn.recv()
    sys.path[:] = list(sys_path)  # task programs are pickled by reference to their module
    for module in preload:
        importlib.import_module(module)
    conn.send(Ready(os.getpid()))
    lock = threading.Lock()  # the program's reports and the heartbeat share the connection

    def send(event: WorkerEvent) -> None:
        with lock:
            conn.send(event)

    departure = Departure(send)
    departure.watch()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        rank, payload, environment = message
        adopt_environment(environment)
        with departure.task(rank):
            with _heartbeat(send, rank):
                result = run_payload(rank, payload, send)
            send(result)
        if departure.leaving:  # its machine is going: no next task here
            return


class Departure:
    """SIGTERM to a worker process (what a spot VM's preemption or a pod's shutdown sends):
    while it runs a task, a notice to its controller, which checkpoints the job and goes on
    without it; the worker trains on meanwhile and leaves once its task ends. While it waits
    for a task, it ends at once, as SIGTERM's default would.

    SIGTERM is blocked in every thread and taken by one thread that waits for it: a handler
    would run in whichever thread the kernel picks, interrupting the system call it was in
    (a collective's socket read) with EINTR."""

    def __init__(self, send: Callable[[WorkerEvent], None]) -> None:
        self._send = send
        self._lock = threading.Lock()
        self._rank: int | None = None  # the rank of the task running, if any
        self.leaving = False

    def watch(self) -> None:
        threading.Thread(target=self._wait, name="scaletune-notices", daemon=True).start()

    @contextlib.contextmanager
    def task(self, rank: int) -> Iterator[None]:
        with self._lock:
            self._rank = rank
        try:
            yield
        finally:
            with self._lock:
                self._rank = None

    def _wait(self) -> None:
        while True:
            signal.sigwait({signal.SIGTERM})
            with self._lock:
                rank, noticed = self._rank, self.leaving
                if rank is None:  # idle: nothing to save, end as SIGTERM ends a process
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                    signal.raise_signal(signal.SIGTERM)
                    return
                self.leaving = True
            if not noticed:  # a second SIGTERM says nothing new
                try:
                    self._send(Notice(rank))
                except OSError:  # the controller is gone: the parent watch ends this process
                    return


@contextlib.contextmanager
def _heartbeat(send: Callable[[WorkerEvent], None], rank: int) -> Iterator[None]:
    """A thread that says this worker is alive while its task runs. It runs while the program
    waits in a collective too (those release the GIL); it stops with the whole process."""
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_SECONDS):
            try:
                send(Heartbeat(rank))
            except OSError:  # the controller is gone: the parent watch ends this process
                return

    thread = threading.Thread(target=beat, name="scaletune-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def run_payload(
    rank: int,
    payload: bytes,
    send: Callable[[WorkerEvent], None],
    *,
    signals_for: Callable[[str], ControllerSignals] | None = None,
    log_path: Path | None = None,
) -> Finished | Failed:
    """Run one pickled task to its end; its reports go to `send` as they come.

    A backend whose workers cannot see the controller's files passes `signals_for` (given
    the job's id) and a `log_path` of the worker's own.
    """
    try:
        task = pickle.loads(payload)
    except Exception as exc:  # e.g. the program's module cannot be imported here
        return Failed(
            rank, f"cannot load the task: {type(exc).__name__}: {exc}", traceback.format_exc()
        )
    if log_path is not None:
        task = dataclasses.replace(task, log_path=log_path)
    return _run(task, send, None if signals_for is None else signals_for(task.job_id))


def _run(
    task: WorkerTask,
    send: Callable[[WorkerEvent], None],
    signals: ControllerSignals | None,
) -> Finished | Failed:
    with _output_to(task.log_path), _temp_files_in(task):
        print(  # which machine ran which rank: the first thing to know on a cluster
            f"scaletune: job {task.job_id}, rank {task.rank} of {task.world_size}, on "
            f"{socket.gethostname()} (pid {os.getpid()})",
            flush=True,
        )
        try:
            with _model_folder(task) as staged:
                context = WorkerContext(staged, send, signals)
                staged.program(context)
        except BaseException as exc:  # the job fails with this worker's error, whatever it is
            trace = traceback.format_exc()
            print(trace, file=sys.stderr, flush=True)
            return Failed(task.rank, f"{type(exc).__name__}: {exc}", trace)
    return Finished(task.rank, stopped=context.stop_seen)


@contextlib.contextmanager
def _temp_files_in(task: WorkerTask) -> Iterator[None]:
    """This task's temp files (its script's folder, a URL upload's) inside the job's scratch
    folder where this worker can see it: removed with it even if this worker is killed."""
    if task.scratch is None or not task.scratch.is_dir():  # another machine (Ray)
        yield
        return
    folder = task.scratch / f"worker-{task.rank}-attempt-{task.attempt}"
    folder.mkdir(exist_ok=True)
    saved, tempfile.tempdir = tempfile.tempdir, str(folder)
    try:
        yield
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _model_folder(task: WorkerTask) -> Iterator[WorkerTask]:
    """With staging at a URL, rank 0 saves into a folder of its own, uploaded once its
    program returns (the controller fetches it from there)."""
    if task.model_url is None:
        yield task
        return
    with tempfile.TemporaryDirectory(prefix="scaletune-model-") as folder:
        yield dataclasses.replace(task, model_dir=Path(folder))
        if task.rank == 0:
            put_folder(Path(folder), task.model_url)


@contextlib.contextmanager
def _output_to(log_path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (native libraries' too) to the job's log file."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _exit_with_parent(parent_pid: int) -> None:
    """A worker never outlives its controller, even one killed with SIGKILL."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="scaletune-parent-watch", daemon=True).start()
