"""What each worker does for a user's script: launch it with the environment frameworks
expect, pass its output to the log, turn its reports into metrics, stop it when asked."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np

from scaletune.reporting import (
    CHECKPOINT_DIR_ENV,
    CHECKPOINT_KEEP_ENV,
    CHECKPOINT_PREFIX,
    CHECKPOINT_ROOT_ENV,
    CHECKPOINT_SAVES_ENV,
    CHECKPOINT_STEP_ENV,
    COLLECTIVE_TIMEOUT_ENV,
    JUDGED_FILE_ENV,
    JUDGED_STEPS_ENV,
    REPORT_ENV,
    REPORT_PREFIX,
    STOP_GOES_ON_ENV,
)
from scaletune.spec import MetricDefinition, ScriptSpec, TaskKind, TaskRole, task_role
from scaletune.worker import JUDGED_FILE, WorkerContext, inherited_environment, write_whole

STOP_GOES_ON_FILE = "stop-goes-on"  # in the script's folder (`scaletune.stop_goes_on`)
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
        environment = _environment(ctx, script, folder)
        command = _command(script, ctx.task.hyperparameters.model_dump(), folder)
        reporting = ctx.rank == ctx.task.reporting_rank
        parser = (
            _OutputParser(ctx, script.metric_definitions, reporting, folder / JUDGED_FILE)
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
            _reader(process.stdout, sys.stdout, parser.feed if parser else None),
            _reader(process.stderr, sys.stderr, tail.append),
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

    def __init__(self, ctx: WorkerContext, folder: Path, parser: _OutputParser | None) -> None:
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


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _environment(ctx: WorkerContext, script: ScriptSpec, folder: Path) -> dict[str, str]:
    task = ctx.task
    rendezvous = task.rendezvous
    environment = inherited_environment()  # not what scaletune's own imports set
    environment.update(
        {
            # torch.distributed (init_method="env://"), torchrun-style scripts.
            "RANK": str(ctx.rank),
            "WORLD_SIZE": str(ctx.world_size),
            "LOCAL_RANK": str(ctx.rank),
            "LOCAL_WORLD_SIZE": str(ctx.world_size),
            "MASTER_ADDR": rendezvous.master_addr,
            "MASTER_PORT": str(rendezvous.master_port),
            COLLECTIVE_TIMEOUT_ENV: f"{rendezvous.collective_timeout_seconds:g}",
            # TensorFlow's MultiWorkerMirroredStrategy, or its ParameterServerStrategy.
            "TF_CONFIG": json.dumps(tf_config(ctx)),
            REPORT_ENV: "stdout",
            "SCALETUNE_HYPERPARAMETERS": str(folder / "hyperparameters.json"),
            # Only rank 0's model folder is published; the others write to a throw-away one.
            "SCALETUNE_MODEL_DIR": str(task.model_dir if ctx.is_chief else folder / "model"),
            "SCALETUNE_JOB_ID": task.job_id,
            "SCALETUNE_SEED": str(task.seed),
            STOP_GOES_ON_ENV: str(folder / STOP_GOES_ON_FILE),
            # The reporting rank waits at these steps' reports (its peers, at their next
            # collective); its worker writes the verdict's step to the file.
            JUDGED_STEPS_ENV: ",".join(map(str, sorted(task.judged_steps)))
            if ctx.rank == task.reporting_rank
            else "",
            JUDGED_FILE_ENV: str(folder / JUDGED_FILE),
            "PYTHONUNBUFFERED": "1",  # reports and metric lines arrive as printed
            # Whatever the script leaves in its temp dir goes when the task ends.
            "TMPDIR": str(folder / "tmp"),
        }
    )
    (folder / "model").mkdir()
    (folder / "tmp").mkdir()
    environment.update(_checkpoint_variables(ctx, folder / "checkpoint"))
    environment.update(_tracker_variables(ctx))
    if task.concurrent_workers is not None:
        # One of a tuning job's parallel trials: its math libraries (OpenMP, as torch and
        # XGBoost use it; BLAS) on its share of the cores, as the built-in algorithms run,
        # unless the user's environment names a number itself.
        for name in THREAD_VARIABLES:
            environment.setdefault(name, str(ctx.threads))
    environment["SCALETUNE_SHARD_INDEX"] = str(ctx.rank)
    environment["SCALETUNE_SHARD_COUNT"] = str(ctx.world_size)
    role = _role(ctx)
    environment["SCALETUNE_TASK_ROLE"] = role.kind.value  # worker, chief or ps
    # Under ParameterServerStrategy the chief's dataset_fn feeds the workers: the chief gets
    # every row, the workers and servers none; otherwise each worker its ~1/N.
    serving = task.distribution.parameter_servers is not None and role.kind is not TaskKind.CHIEF
    part = (0, 1) if role.kind is TaskKind.CHIEF else (ctx.rank, ctx.world_size)
    for name, channel in [] if serving else task.channels.items():
        key = f"SCALETUNE_CHANNEL_{name.upper()}"
        shard = channel.read(*part)
        channel_folder = folder / "channels" / name
        channel_folder.mkdir(parents=True)
        np.save(channel_folder / "features.npy", shard.features)
        np.save(channel_folder / "labels.npy", shard.labels)
        environment[key] = str(channel_folder)  # this worker's rows, ready to load
        start, stop = channel.bounds(*part)
        environment[f"{key}_ROWS"] = f"{start}:{stop}"  # of the whole channel
        environment[f"{key}_TOTAL_ROWS"] = str(channel.n_rows())
        if channel.source is not None:  # for scripts that read the original files themselves
            environment[f"{key}_SOURCE"] = str(channel.source)
    return environment


def _role(ctx: WorkerContext) -> TaskRole:
    return task_role(ctx.rank, ctx.world_size, ctx.task.distribution.parameter_servers)


def tf_config(ctx: WorkerContext) -> dict[str, object]:
    """TensorFlow's cluster and this process's task in it. Each rank's address is on its
    own node, as the rendezvous chose it; the roles follow `task_role`."""
    addresses = list(ctx.task.rendezvous.worker_addresses)
    roles = [
        task_role(rank, len(addresses), ctx.task.distribution.parameter_servers)
        for rank in range(len(addresses))
    ]
    cluster: dict[str, list[str]] = {}
    for role, address in zip(roles, addresses, strict=True):
        cluster.setdefault(role.kind.value, []).append(address)
    mine = roles[ctx.rank]
    return {"cluster": cluster, "task": {"type": mine.kind.value, "index": mine.index}}


def _checkpoint_variables(ctx: WorkerContext, folder: Path) -> dict[str, str]:
    """The script's checkpoint folder, with the checkpoint to resume from restored in it
    (on every rank: each loads what rank 0 saved, as DDP scripts expect)."""
    folder.mkdir()
    checkpoints = ctx.checkpoints
    if checkpoints is None:
        return {}
    variables = {
        CHECKPOINT_DIR_ENV: str(folder),
        CHECKPOINT_ROOT_ENV: checkpoints.plan.root,
        CHECKPOINT_KEEP_ENV: str(checkpoints.plan.keep),
        CHECKPOINT_SAVES_ENV: "1" if ctx.is_chief else "0",
    }
    if checkpoints.resume_step is not None:
        for name, content in checkpoints.load().items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(content)
        variables[CHECKPOINT_STEP_ENV] = str(checkpoints.resume_step)
    return variables


def _tracker_variables(ctx: WorkerContext) -> dict[str, str]:
    """XGBoost's collective reads these (xgboost.collective.init(**from the environment))."""
    tracker = ctx.task.rendezvous.xgboost_tracker
    if not tracker:
        return {}
    return {
        "DMLC_TRACKER_URI": str(tracker["dmlc_tracker_uri"]),
        "DMLC_TRACKER_PORT": str(tracker["dmlc_tracker_port"]),
        "DMLC_TASK_ID": f"{ctx.rank:06d}",  # the tracker ranks workers by this
        "DMLC_NUM_WORKER": str(ctx.world_size),
    }


def _command(script: ScriptSpec, hyperparameters: dict[str, object], folder: Path) -> list[str]:
    (folder / "hyperparameters.json").write_text(json.dumps(hyperparameters, indent=2))
    arguments = []
    for name, value in hyperparameters.items():
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        arguments += [f"--{name}", text.lower() if isinstance(value, bool) else text]
    if script.entry_point.endswith(".py"):
        return [sys.executable, script.entry_point, *arguments]
    return [*shlex.split(script.entry_point), *arguments]


def _reader(
    stream: IO[bytes] | None, sink: IO[str], on_line: Callable[[str], None] | None
) -> threading.Thread:
    """Copy the script's output into the worker's log, line by line, handing each on."""

    def copy() -> None:
        assert stream is not None
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            if on_line is not None:
                on_line(line)
            sink.write(line)
            sink.flush()
        stream.close()

    thread = threading.Thread(target=copy, name="scaletune-script-output", daemon=True)
    thread.start()
    return thread


class _OutputParser:
    """Rank 0's stdout: report lines, and lines the metric definitions match."""

    def __init__(
        self,
        ctx: WorkerContext,
        definitions: list[MetricDefinition],
        reporting: bool,
        judged_file: Path,
    ) -> None:
        self._ctx = ctx
        self._reporting = reporting  # its reports count; otherwise only checkpoints are read
        self._judged_file = judged_file  # where the script, held at a rung, reads its verdict
        self._patterns = [(d.name, re.compile(d.regex)) for d in definitions]
        self._counts: dict[str, int] = collections.Counter()
        self.last_step: int | None = None
        self.script_checkpoints = False  # it saves its own (scaletune.checkpoint)

    def feed(self, line: str) -> None:
        if line.startswith(CHECKPOINT_PREFIX):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                payload = json.loads(line[len(CHECKPOINT_PREFIX) :])
                step, seconds = int(payload["step"]), float(payload["seconds"])
                self.script_checkpoints = True
                if self._ctx.checkpoints is not None:
                    self._ctx.checkpoints.saved_by_program(step, seconds)
                return
        if not self._reporting:
            return
        if line.startswith(REPORT_PREFIX):
            try:
                payload = json.loads(line[len(REPORT_PREFIX) :])
                step, metrics = int(payload["step"]), dict(payload["metrics"])
            except (ValueError, KeyError, TypeError):
                pass  # not a report after all: an ordinary line, for the regexes below
            else:
                self.last_step = step
                self._report(step, metrics)
                return
        for name, pattern in self._patterns:
            match = pattern.search(line)
            if match is None:
                continue
            groups = match.groupdict()
            text = groups.get("value") or match.group(1)
            try:
                value = float(text)
            except (TypeError, ValueError):
                continue
            self._counts[name] += 1
            step = int(groups["step"]) if groups.get("step") else self._counts[name]
            self.last_step = step
            self._report(step, {name: value})

    def _report(self, step: int, metrics: dict[str, float]) -> None:
        """Reported; at a judged step, once the verdict is in (ctx.report waits for it), the
        script, held there by `scaletune.report`, is told to go on, unless it was a stop:
        then the SIGTERM that follows ends its wait."""
        self._ctx.report(step, **metrics)
        if step in self._ctx.task.judged_steps and not self._ctx.stop_requested():
            write_whole(self._judged_file, str(step))
