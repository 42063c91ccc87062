"""What each worker does for a user's script: launch it with the environment frameworks
expect, pass its output to the log, turn its reports into metrics, stop it when asked."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from scaletune.spec import ScriptSpec
from scaletune.worker import JUDGED_FILE, WorkerContext

from ._environment import STOP_GOES_ON_FILE, script_environment
from ._output import OutputParser, copy_output

STOP_GRACE_SECONDS = 3.0  # after SIGTERM, before SIGKILL (the controller waits longer)
STOP_POLL_SECONDS = 0.1  # how often a running script's worker looks for a stop request
STDERR_TAIL_LINES = 20
_PR_SET_PDEATHSIG = 1


class ScriptError(Exception):
    """The script exited with an error: its exit code and the end of its stderr."""


def run_script(ctx: WorkerContext) -> None:
    script = ctx.task.script
    assert script is not None  # the spec requires it for this algorithm
    with tempfile.TemporaryDirectory(prefix=f"scaletune-script-{ctx.rank}-") as scratch:
        folder = Path(scratch)
        environment = script_environment(ctx, folder)
        command = _command(script, ctx.task.hyperparameters.model_dump(), folder)
        reporting = ctx.rank == ctx.task.reporting_rank
        parser = (
            OutputParser(ctx, script.metric_definitions, reporting, folder / JUDGED_FILE)
            if reporting or ctx.is_chief
            else None
        )
        process = subprocess.Popen(
            command,
            cwd=script.source_dir,
            env=environment,
            stdin=subprocess.DEVNULL,  # a job has no terminal to read from
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # Its own process group, so that a stop ends its children too; in the worker's
            # session, not a new one: with the kernel's autogroup scheduling every session is
            # a scheduling group of its own, and a TensorFlow job whose ranks each had one
            # stepped slower (benchmarks/results/tf_sessions.md).
            process_group=0,
            preexec_fn=_prepare_child,
        )
        tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        readers = [
            copy_output(process.stdout, sys.stdout, parser.feed if parser else None),
            copy_output(process.stderr, sys.stderr, tail.append),
        ]
        autosave = _Autosave(ctx, folder / "checkpoint", parser)
        stopped = _wait(process, ctx, autosave, folder / STOP_GOES_ON_FILE)
        for reader in readers:
            reader.join()
    if stopped:
        return  # asked to stop: the job ends as Stopped, not Failed
    last = " | ".join(line.strip() for line in list(tail)[-3:] if line.strip())
    if process.returncode < 0:  # killed from outside (OOM killer, kill -9), or it crashed
        number = -process.returncode
        said = f": {last}" if last and number in _CRASH_SIGNALS else ""
        raise ScriptError(f"{script.entry_point} was killed by {_signal_name(number)}{said}")
    if process.returncode != 0:
        raise ScriptError(
            f"{script.entry_point} exited with code {process.returncode}"
            + (f": {last}" if last else "")
        )


# Signals a process sends itself as it crashes (a C++ library's std::terminate, a bad
# pointer): its last words on stderr say why. A kill from outside leaves nothing to read.
_CRASH_SIGNALS = frozenset(
    {signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}
)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Autosave:
    """A script that never calls `scaletune.checkpoint()` has its checkpoint folder saved
    every `checkpoint.every_seconds` (rank 0's), as the files are at that moment."""

    def __init__(self, ctx: WorkerContext, folder: Path, parser: OutputParser | None) -> None:
        self._ctx, self._folder, self._parser = ctx, folder, parser

    def __call__(self) -> None:
        checkpoints = self._ctx.checkpoints
        parser = self._parser
        if not self._ctx.is_chief or checkpoints is None or parser is None:
            return
        if parser.script_checkpoints or not checkpoints.time_due():
            return
        files = {
            path.relative_to(self._folder).as_posix(): path.read_bytes()
            for path in sorted(self._folder.rglob("*"))
            if path.is_file()
        }
        if files:
            checkpoints.save(parser.last_step or 0, files)


def _wait(
    process: subprocess.Popen[bytes],
    ctx: WorkerContext,
    autosave: Callable[[], None],
    goes_on_file: Path,
) -> bool:
    """Wait for the script; if the controller asks to stop, SIGTERM its process group, then
    SIGKILL. True when it was stopped."""
    with _ExitWatch(process) as exited:
        while not exited(STOP_POLL_SECONDS):
            autosave()
            if ctx.stop_requested():
                _stop(process, goes_on_file if ctx.stop_goes_on() else None)
                return True
    return False


class _ExitWatch:
    """Waits up to a timeout for the script to exit, asleep until it does: on Linux through a
    pidfd. `Popen.wait(timeout)` polls instead, waking about 80 times a second, and a
    distributed script's collective steps feel every wakeup on a small machine."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._pidfd: int | None = None
        self._poll = select.poll()

    def __enter__(self) -> Callable[[float], bool]:
        with contextlib.suppress(AttributeError, OSError):  # not Linux 5.3+
            self._pidfd = os.pidfd_open(self._process.pid)
            self._poll.register(self._pidfd, select.POLLIN)
        return self._exited

    def __exit__(self, *_: object) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)

    def _exited(self, timeout: float) -> bool:
        if self._pidfd is not None and not self._poll.poll(timeout * 1000):
            return False
        try:
            self._process.wait(timeout=0 if self._pidfd is not None else timeout)
        except subprocess.TimeoutExpired:
            return False
        return True


def _stop(process: subprocess.Popen[bytes], goes_on: Path | None) -> None:
    """SIGTERM the script's process group, then SIGKILL after the grace period. A stop the
    job goes on from first says so (the file `goes_on`, `scaletune.stop_goes_on()`) and has
    no grace of its own: the script saves a checkpoint, as long as the controller's grace
    (a preemption notice's deadline) allows."""
    if goes_on is not None:
        goes_on.touch()
    _signal_group(process, signal.SIGTERM)
    try:
        process.wait(timeout=None if goes_on is not None else STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.wait()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


def _prepare_child() -> None:
    """In the child: SIGTERM works again (its worker blocks it, and a mask is inherited),
    and the kernel kills the script if its worker dies (even by SIGKILL)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _command(script: ScriptSpec, hyperparameters: dict[str, object], folder: Path) -> list[str]:
    (folder / "hyperparameters.json").write_text(json.dumps(hyperparameters, indent=2))
    arguments = []
    for name, value in hyperparameters.items():
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        arguments += [f"--{name}", text.lower() if isinstance(value, bool) else text]
    if script.entry_point.endswith(".py"):
        return [sys.executable, script.entry_point, *arguments]
    return [*shlex.split(script.entry_point), *arguments]
